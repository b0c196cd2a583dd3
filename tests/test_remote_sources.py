"""What a team-server request's sources may name (`dice_lsp.remote.sources`): the include pre-check reads
directives as the preprocessor does, so splices and comments do not hide a host path from it."""

from __future__ import annotations

import pytest

from dice_lsp.remote.protocol import RemoteError
from dice_lsp.remote.sources import check_sources

HIDDEN = {
    "spliced": '#inc\\\nlude "/etc/passwd"\n',
    "spliced CRLF": '#include \\\r\n"/etc/passwd"\n',
    "comment in the directive": '#/**/include/* x */"/etc/passwd"\n',
    "comment over lines": '/* a\nb */ #include "/etc/passwd"\n',
    "has_include spliced": '#if __has_inc\\\nlude("/etc/passwd")\n#endif\n',
}


@pytest.mark.parametrize("name", list(HIDDEN))
def test_an_include_hidden_by_a_splice_or_a_comment_is_still_refused(name: str) -> None:
    with pytest.raises(RemoteError) as error:
        check_sources({"k.cu": "int x;\n" + HIDDEN[name]}, ())
    assert error.value.code == "bad_params" and "names a file outside the request" in str(error.value)
    assert str(error.value).startswith("k.cu:2: ") or name == "comment over lines"


def test_what_only_looks_like_an_include_passes() -> None:
    text = ('// #include "/etc/passwd"\n/* #include "/etc/passwd" */\nconst char* s = "/* #include \\"/etc/x\\"";\n'
            '#include "local.cuh"\n')
    check_sources({"k.cu": text, "local.cuh": ""}, ())
