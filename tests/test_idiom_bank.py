"""The idiom bank: mined from a corpus (dice_lsp.training.idioms) and proposed at a hole
(dice_lsp.completion.sources.idioms)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from dice_lsp.completion.features import support
from dice_lsp.completion.lexing import declared_name
from dice_lsp.completion.sources import Candidate
from dice_lsp.completion.sources.idioms import (
    DEFAULT_PATH,
    FORMAT,
    IdiomBank,
    abstract_key,
    abstract_value,
    candidates,
    context_line,
    continuation,
    instantiate,
    score,
)
from dice_lsp.training.idioms import (
    GpuFile,
    Thresholds,
    bank_bytes,
    build_bank,
    code_lines,
    context_pairs,
    main,
    project_of,
)

KERNEL = """__global__ void {k}(float* {o}, const float* {i}) {{
  extern __shared__ float {s}[];
  int tid = threadIdx.x;
  {s}[tid] = {i}[tid];
  /* wait for
     everyone */
  __syncthreads();
  // write back
  {o}[tid] = {s}[tid];
}}
"""


def fake_files() -> list[GpuFile]:
    """Three kernels of one shape from two sources; the shared array's name differs in source b."""
    return [
        GpuFile("a", "a1.cu", KERNEL.format(k="k", o="out", i="in", s="sdata")),
        GpuFile("a", "a2.cu", KERNEL.format(k="r", o="y", i="x", s="sdata")),
        GpuFile("b", "b1.cu", KERNEL.format(k="q", o="dst", i="src", s="smem")),
    ]


def test_context_pairs_skip_comments_blocks_and_braces() -> None:
    assert list(context_pairs(KERNEL.format(k="k", o="out", i="in", s="sdata"))) == [
        ("__global__ void k(float* out, const float* in) {", "extern __shared__ float sdata[];"),
        ("extern __shared__ float sdata[];", "int tid = threadIdx.x;"),
        ("int tid = threadIdx.x;", "sdata[tid] = in[tid];"),
        ("sdata[tid] = in[tid];", "__syncthreads();"),
        ("__syncthreads();", "out[tid] = sdata[tid];"),
    ]
    macro = "#define LOOP(i, n) \\\n  for (int i = 0; i < n; ++i)\nint a = 0;\n{\n  b = a;\n}\n"
    assert list(context_pairs(macro)) == [("#define LOOP(i, n) \\", "int a = 0;"), ("int a = 0;", "b = a;")]


def test_context_pairs_below_pair_each_statement_with_the_next_code_line() -> None:
    kernel = KERNEL.format(k="k", o="out", i="in", s="sdata")
    assert list(context_pairs(kernel, "below")) == [
        ("extern __shared__ float sdata[];", "__global__ void k(float* out, const float* in) {"),
        ("int tid = threadIdx.x;", "extern __shared__ float sdata[];"),
        ("sdata[tid] = in[tid];", "int tid = threadIdx.x;"),
        ("__syncthreads();", "sdata[tid] = in[tid];"),
        ("out[tid] = sdata[tid];", "__syncthreads();"),
        ("}", "out[tid] = sdata[tid];"),
    ]
    # the signature is a statement line too (a hole may hold it): its context below is the body's first line
    assert code_lines(kernel)[0] == ("__global__ void k(float* out, const float* in) {", True)
    macro = "#define LOOP(i, n) \\\n  for (int i = 0; i < n; ++i)\nint a = 0;\n{\n  b = a;\n}\n"
    assert list(context_pairs(macro, "below")) == [("b = a;", "int a = 0;"), ("}", "b = a;")]


def test_abstraction_keeps_cuda_vocabulary_and_numbers() -> None:
    key, names = abstract_key("int idx = blockIdx.x * blockDim.x + threadIdx.x;") or ("", [])
    assert (key, names) == ("int $0=blockIdx.x*blockDim.x+threadIdx.x;", ["idx"])
    key, names = abstract_key("val += __shfl_down_sync(0xffffffff, val, offset); // reduce") or ("", [])
    assert (key, names) == ("$0+=__shfl_down_sync(0xffffffff,$0,$1);", ["val", "offset"])
    assert abstract_key("for (int k = 0; k < n; ++k) {") == ("for(int $0=0;$0<$1;++$0)", ["k", "n"])
    assert abstract_value("if (idx < n) {", ["idx"]) == ("if($0<n){", "if ($0 < n) {")
    assert abstract_key("// only a comment") is None


def test_miner_gives_exactly_the_frequent_dominant_pairs() -> None:
    bank = build_bank(fake_files(), Thresholds())
    # `extern __shared__ float sdata[];` follows the signature in 2 files only (smem in b): not kept as written,
    # kept with a free placeholder ($3: no name of the signature); after `int tid = threadIdx.x;` the copy
    # names two arrays the key does not bind: only its free form is frequent.
    assert bank["entries"] == {
        "$0[$1]=$2[$1];": [3, [["__syncthreads();", 3, 2, 1.0]]],
        "__global__ void $0(float*$1,const float*$2)": [3, [["extern __shared__ float $3[];", 3, 2, 1.0]]],
        "__syncthreads();": [3, [["$0[$1] = $2[$1];", 3, 2, 1.0]]],
        "extern __shared__ float $0[];": [3, [["int $1 = threadIdx.x;", 3, 2, 1.0],
                                              ["int tid = threadIdx.x;", 3, 2, 1.0]]],
        "int $0=threadIdx.x;": [3, [["$1[$0] = $2[$0];", 3, 2, 1.0]]],
    }
    # the lines each statement precedes: `int tid = threadIdx.x;` comes before a copy indexed by it, and so does
    # `__syncthreads();` (the copy back): each half of that key's six lines
    assert bank["below"] == {
        "$0[$1]=$2[$1];": [6, [["__syncthreads();", 3, 2, 0.5], ["int $1 = threadIdx.x;", 3, 2, 0.5]]],
        "__syncthreads();": [3, [["$0[$1] = $2[$1];", 3, 2, 1.0]]],
        "extern __shared__ float $0[];": [3, [["__global__ void $1(float* $2, const float* $3) {", 3, 2, 1.0]]],
        "int $0=threadIdx.x;": [3, [["extern __shared__ float $1[];", 3, 2, 1.0]]],
        "}": [3, [["$0[$1] = $2[$1];", 3, 2, 1.0]]],
    }
    # one-line declarations by the name declared: `int tid = threadIdx.x;` in all three files; the shared array is
    # `sdata` in one project only, `smem` in one file
    assert bank["declarations"] == {"tid": [3, [["int tid = threadIdx.x;", 3, 2, 1.0]]]}
    assert bank["format"] == FORMAT
    assert bank["corpus"] == {"split": "train", "dialects": ["cuda", "cuda-pystring"], "sources": ["a", "b"],
                              "projects": 2, "files": 3, "pairs": 15}
    assert bank["names"] == []  # no name is in 10 projects here
    one_project = build_bank([f for f in fake_files() if f.source == "a"], Thresholds())
    assert one_project["entries"] == {}  # one project is never enough


def test_miner_specific_keys_keep_common_names() -> None:
    files = [GpuFile(f.source, f.path, f.text.replace("(float* x,", "(float* v,").replace("= x[", "= v["))
             for f in fake_files()]
    bank = build_bank(files, Thresholds(min_name_projects=2))
    assert "tid" in bank["names"] and "sdata" not in bank["names"]  # sdata: project a only
    # the specific key keeps `tid` concrete, in the key and in its values
    assert bank["entries"]["int tid=threadIdx.x;"] == [3, [["$0[tid] = $1[tid];", 3, 2, 1.0]]]
    assert bank["entries"]["$0[tid]=$1[tid];"] == [3, [["__syncthreads();", 3, 2, 1.0]]]


def test_versions_and_vendored_copies_are_one_project() -> None:
    assert project_of("pytorch-2.6", "pytorch/aten/src/ATen/native/cuda/Loss.cu") == "pytorch"
    assert project_of("pytorch", "pytorch/aten/src/ATen/native/cuda/Loss.cu") == "pytorch"
    assert project_of("tilelang", "3rdparty/tvm/3rdparty/cutlass_fpA_intB_gemm/cutlass/examples/a.cu") == "cutlass"
    assert project_of("nvidia-cutlass", "cutlass_library/source/examples/a.cu") == "cutlass"
    assert project_of("llama-cpp-python", "vendor/llama.cpp/ggml/src/ggml-cuda/mmq.cu") == "ggml"
    assert project_of("flashinfer-python", "csrc/norm.cu") == "flashinfer"


def test_bank_bytes_are_deterministic() -> None:
    first = bank_bytes(build_bank(fake_files(), Thresholds()))
    again = bank_bytes(build_bank(fake_files(), Thresholds()))
    assert first == again
    assert first[4:8] == b"\0\0\0\0"  # gzip mtime 0
    assert json.loads(gzip.decompress(first))["entries"]["$0[$1]=$2[$1];"][1][0][0] == "__syncthreads();"


def write_corpus(folder: Path) -> None:
    rows = [{"source": f.source, "path": f.path, "lang": "cuda", "dialect": "cuda", "license": "MIT",
             "text": f.text} for f in fake_files()]
    rows.append({**rows[0], "path": "gpl.cu", "license": "GPL-2.0-only"})  # never trained on: not mined
    rows.append({**rows[0], "path": "hip.cu", "dialect": "hip"})  # not a default dialect
    folder.mkdir()
    (folder / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_cli_mines_a_corpus_and_reports_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_corpus(tmp_path / "corpus")
    out = tmp_path / "bank.json.gz"
    assert main(["--corpus", str(tmp_path / "corpus"), "--out", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["files"], summary["keys"], summary["entries"]) == (3, 5, 6)
    assert (summary["below_keys"], summary["below_entries"]) == (5, 6)
    assert (summary["declared_names"], summary["declarations"]) == (1, 1)
    assert out.read_bytes() == bank_bytes(build_bank(fake_files(), Thresholds()))


def test_cli_missing_corpus_is_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--corpus", str(tmp_path / "nope"), "--out", str(tmp_path / "b.json.gz")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("error: ") and "train.jsonl: not found" in err
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "train.jsonl").write_text("{not json\n")
    assert main(["--corpus", str(tmp_path / "bad"), "--out", str(tmp_path / "b.json.gz")]) == 2
    assert "train.jsonl:1: not a corpus record" in capsys.readouterr().err
    assert not (tmp_path / "b.json.gz").exists()


def hand_bank() -> IdiomBank:
    return IdiomBank.from_json({"format": FORMAT, "names": ["offset"], "entries": {
        "int $0=blockIdx.x*blockDim.x+threadIdx.x;": [20, [["if ($0 < $1) {", 9, 3, 0.45],
                                                         ["if ($0 < n) {", 8, 4, 0.4]]],
        "for(int $0=blockIdx.x*blockDim.x+threadIdx.x;$0<$1;$0+=blockDim.x*gridDim.x)": [
            6, [["if ($0 + 1 < $1) {", 6, 2, 1.0]]],
        "for(int $0=16;$0>0;$0/=2)": [40, [["$1 += __shfl_down_sync(0xffffffff, $1, $0);", 30, 5, 0.75]]],
        "for(int offset=16;offset>0;offset/=2)": [10, [["val += __shfl_down_sync(0xffffffff, val, offset);",
                                                        6, 3, 0.6]]],
    }})


GRID = "__global__ void f(float* y, int n) {\n  int idx = blockIdx.x * blockDim.x + threadIdx.x;\n"


def test_source_instantiates_bound_placeholders_only() -> None:
    # `if ($0 < $1)`: $1 is not bound by the line above; outside a function nothing names it, and only
    # `if ($0 < n)` can be written
    found = hand_bank().lookup("  int idx = blockIdx.x * blockDim.x + threadIdx.x;\n  ", "\n")
    assert [(c.text, c.source, c.score) for c in found] == [("if (idx < n) {", "idiom", round(8 / 24, 4))]
    assert (found[0].files, found[0].projects, found[0].share, found[0].total) == (8, 4, 0.4, 20)
    assert not found[0].typed_names and found[0].scope_bound == 0
    # in a kernel, the scalar parameter no line uses yet names it: the same text, with the better evidence
    found = hand_bank().lookup(GRID + "  ", "\n}\n")
    assert [(c.text, c.score) for c in found] == [("if (idx < n) {", round(9 / 24, 4))]
    assert (found[0].files, found[0].scope_bound, found[0].scope_alternatives) == (9, 1, 0)
    loop = "  for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < len; j += blockDim.x * gridDim.x) {\n\n    "
    assert [c.text for c in hand_bank().candidates(loop, "\n  }\n")] == ["if (j + 1 < len) {"]
    assert all(isinstance(c, Candidate) for c in hand_bank().candidates(loop, "\n"))


def test_source_joins_the_evidence_of_the_lines_above_and_below() -> None:
    bank = IdiomBank.from_json({"format": FORMAT, "names": [], "entries": {
        "__global__ void $0(const float*$1,float*$2,int $3)": [50, [["int i = threadIdx.x;", 5, 3, 0.1]]],
        "int $0=threadIdx.x;": [30, [["if ($0 < n) {", 6, 3, 0.2]]],
    }, "below": {
        "if($0<$1)$2[$0]=$3[$0];": [40, [["int $0 = blockIdx.x * blockDim.x + threadIdx.x;", 20, 6, 0.5],
                                           ["int $0 = threadIdx.x;", 10, 4, 0.25]]],
    }})
    signature = "__global__ void copy(const float* x, float* y, int n) {\n    "
    found = bank.lookup(signature, "\n    if (i < n) y[i] = x[i];\n}\n")
    # the key below binds `i` (and `n`, `y`, `x`); `int i = threadIdx.x;` has both sides' evidence
    assert [(c.text, c.score, c.sides) for c in found] == [
        ("int i = blockIdx.x * blockDim.x + threadIdx.x;", round(20 / 44, 4), 1),
        ("int i = threadIdx.x;", round(1 - (1 - score(10, 40)) * (1 - score(5, 50)), 4), 2),
    ]
    both = found[1]
    assert (both.files, both.total, both.below_files, both.below_share, both.below_total) == (5, 50, 10, 0.25, 40)
    assert (found[0].files, found[0].below_files, found[0].key) == (None, 20, "if($0<$1)$2[$0]=$3[$0];")
    # a half-typed line keeps only what continues it, from either side
    assert [c.text for c in bank.lookup(signature + "int i = b", "\n    if (i < n) y[i] = x[i];\n")] == [
        "lockIdx.x * blockDim.x + threadIdx.x;"]
    # `}` below (no key for it): only the line above speaks
    assert [(c.text, c.below) for c in bank.lookup(signature, "\n\n    // done\n}\n")] == [
        ("int i = threadIdx.x;", None)]


@pytest.mark.parametrize(("line", "name"), [
    ("int i = blockIdx.x * blockDim.x + threadIdx.x;", "i"),
    ("unsigned int ixj = i ^ j;", "ixj"),
    ("extern __shared__ int s[];", "s"),
    ("__shared__ float tile[TILE_DIM][TILE_DIM + 1];", "tile"),
    ("float4 vb = *reinterpret_cast<const float4 *>(&b[i]);", "vb"),
    ("const float* __restrict__ p = q;", "p"),
    ("const std::vector<int> v = x;", "v"),
    ("float *row = (float *)((char *)devPtr + r * pitch);", "row"),
    ("T acc{};", "acc"),
    ("int pos = atomicAdd(count, 1);  // slot", "pos"),
    ("i = 0;", None), ("a[i] = b;", None), ("return x;", None), ("foo(x);", None), ("delete p;", None),
    ("if (x) y = 1;", None), ("int a, b;", "a"), ("dim3 grid(1, 2);", None), ("int x", None),
])
def test_declared_name_reads_one_line_declarations(line: str, name: str | None) -> None:
    assert declared_name(line) == name


DECLARING = IdiomBank.from_json({"format": FORMAT, "names": [], "entries": {}, "below": {}, "declarations": {
    "i": [100, [["int i = blockIdx.x * blockDim.x + threadIdx.x;", 54, 12, 0.54], ["int i = 0;", 20, 8, 0.2]]],
    "iz": [10, [["int iz = blockIdx.z * blockDim.z + threadIdx.z;", 8, 3, 0.8]]],
}})


def test_source_declares_the_names_the_code_below_needs() -> None:
    before = "__global__ void k(float* y, int n) {\n    "
    after = "\n    if (i < n) y[i] = 0;\n}\n"
    assert DECLARING.lookup(before, after) == []  # nothing needed: no declaration proposed
    found = DECLARING.lookup(before, after, needed=frozenset({"i"}))
    assert [(c.text, c.score, c.declares_files, c.declares_share, c.declares_total, c.files) for c in found] == [
        ("int i = blockIdx.x * blockDim.x + threadIdx.x;", score(54, 100), 54, 0.54, 100, None),
        ("int i = 0;", score(20, 100), 20, 0.2, 100, None)]
    assert found[0].key == "i" and found[0].sides == 1
    # a half-typed declaration names its variable itself: no need to be told
    typed = DECLARING.lookup(before + "int iz = ", after)
    assert [(c.text, c.declares_files) for c in typed] == [("blockIdx.z * blockDim.z + threadIdx.z;", 8)]
    assert DECLARING.lookup(before + "int i = t", after, needed=frozenset({"i"})) == []  # the typed text departs
    # what the show filter reads of it: the declarations' evidence; the keys above and below gave none
    assert support(found[0]) == {"idiom_declares_files": 54.0, "idiom_declares_share": 0.54,
                                 "idiom_declares_total": 100.0, "idiom_typed_names": 0.0, "idiom_sides": 1.0,
                                 "idiom_scope_bound": 0.0, "idiom_scope_alternatives": 0.0}


def test_source_half_typed_line_gets_the_rest() -> None:
    bank = hand_bank()
    assert [c.text for c in bank.candidates(GRID + "  if (id", "\n")] == ["x < n) {"]
    assert [c.text for c in bank.candidates(GRID + "  if (idx <", "\n")] == [" n) {"]
    assert [c.text for c in bank.candidates(GRID + "  if(idx< ", "\n")] == ["n) {"]
    assert bank.candidates(GRID + "  for", "\n") == []
    assert bank.candidates(GRID + "  if (idx < n) {", "\n") == []  # nothing left to add
    assert bank.candidates(GRID + "  ", " = 0;\n") == []  # text after the cursor: not a line hole


def test_source_typed_text_binds_free_placeholders() -> None:
    bank = hand_bank()
    loop = "  for (int off = 16; off > 0; off /= 2)\n    "
    assert bank.candidates(loop, "\n") == []  # `$1` is free: a line hole cannot write it
    found = bank.lookup(loop + "sum += ", "\n")
    assert [(c.text, c.score, c.typed_names) for c in found] == [
        ("__shfl_down_sync(0xffffffff, sum, off);", round(30 / 44, 4), True)]
    assert bank.candidates(loop + "su", "\n") == []  # the name may not be complete yet
    # the specific key (`offset` is a common name) and the generic one both propose; the better evidence wins
    named = "  for (int offset = 16; offset > 0; offset /= 2)\n    val"
    assert [(c.text, c.key) for c in bank.lookup(named + " ", "\n")] == [
        ("+= __shfl_down_sync(0xffffffff, val, offset);", "for(int $0=16;$0>0;$0/=2)")]
    assert [c.text for c in bank.lookup(named.replace("val", ""), "\n")] == [
        "val += __shfl_down_sync(0xffffffff, val, offset);"]


def test_context_line_skips_blank_comment_and_brace_lines() -> None:
    before = "int idx = 0;\n  {\n\n  // note\n  /* more */\n  "
    assert context_line(before, before.rfind("\n") + 1) == "int idx = 0;"
    assert context_line("  ", 0) is None
    assert continuation("__syncthreads();", "") == "__syncthreads();"
    assert instantiate("$0[$1] = 0;", ["a"]) is None
    assert score(3, 3) == round(3 / 7, 4)


def test_missing_bank_gives_no_candidates(tmp_path: Path) -> None:
    bank = IdiomBank.load(tmp_path / "missing.json.gz")
    assert len(bank) == 0
    assert bank.candidates(GRID + "  ", "\n}\n") == []
    assert IdiomBank.load(tmp_path / "missing.json.gz") is bank  # cached per path


SHIPPED = pytest.mark.skipif(not DEFAULT_PATH.is_file(), reason="the shipped idiom bank is not built")
REDUCE = """__global__ void reduce(const float* in, float* out) {
    extern __shared__ float sdata[];
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    sdata[tid] = in[i];
    """


@SHIPPED
def test_shipped_bank_loads() -> None:
    bank = IdiomBank.load()
    assert bank.meta["format"] == FORMAT
    assert bank.meta["corpus"]["split"] == "train"
    assert len(bank) > 5000
    assert candidates(GRID + "  ", "\n}\n") == bank.candidates(GRID + "  ", "\n}\n")


@SHIPPED
def test_shipped_bank_after_a_shared_memory_store() -> None:
    # What the shipped bank really does after `sdata[tid] = in[i];`: the generic key `$0[$1]=$2[$3];` (any
    # array copy) is followed by `} else {` more often than by `__syncthreads();`, and weakly either way.
    found = IdiomBank.load().lookup(REDUCE, "\n}\n")
    assert [(c.text, c.score, c.files, c.projects, c.total) for c in found] == [
        ("} else {", 0.1126, 17, 6, 147),
        ("__syncthreads();", 0.0331, 5, 2, 147),
        ("tid++;", 0.0331, 5, 4, 147),  # `$1++;`: the hole's own index name
    ]
    assert {c.key for c in found} == {"$0[$1]=$2[$3];"}


@SHIPPED
def test_shipped_bank_completes_a_half_typed_shuffle() -> None:
    loop = "    for (int offset = 16; offset > 0; offset >>= 1)\n        val += "
    found = IdiomBank.load().lookup(loop, "\n")
    assert [(c.text, c.typed_names) for c in found] == [("__shfl_down_sync(0xffffffff, val, offset);", True)]
    # on the emptied line only values written as they were can be proposed: a frequent concrete one
    line = IdiomBank.load().lookup(loop.removesuffix("val += "), "\n")
    assert [(c.text, c.typed_names) for c in line] == [
        ("val[i] += __shfl_xor_sync(FINAL_MASK, val[i], offset, 32);", False)]


@SHIPPED
def test_shipped_bank_declares_the_index_a_kernel_body_needs() -> None:
    # The first line of a kernel emptied: the code below uses `i`, which nothing declares. The corpus's most
    # frequent one-line declaration of `i` is the global thread index, weakly (27 of 427 files' declarations of
    # an `i`): a proposal for the show filter to weigh, not a decision.
    before = "__global__ void add(const float* a, const float* b, float* c, int n) {\n    "
    after = "\n    if (i < n) c[i] = a[i] + b[i];\n}\n"
    found = IdiomBank.load().lookup(before, after, 3, needed=frozenset({"i"}))
    assert [(c.text, c.declares_files, c.declares_total) for c in found] == [
        ("int i = blockIdx.x * blockDim.x + threadIdx.x;", 27, 427), ("int i = 0;", 15, 427), ("int i;", 13, 427)]
    assert IdiomBank.load().lookup(before, after, 3) != found  # without the checks' needed names: not these
