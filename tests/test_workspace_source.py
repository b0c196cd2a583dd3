"""Candidates from the workspace's other files (`dice_lsp.completion.sources.workspace`): golden cases of the
index (the right line from another file, the edited file excluded, a half-typed line, identical lines counted,
removal and update), of the background indexer (ignore files, symbolic links, trust, changes on disk) and of the
bounds (huge, minified and generated files, caps, eviction, dead postings swept)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from dice_lsp.completion.sources import document
from dice_lsp.completion.sources import workspace as ws
from dice_lsp.completion.sources.workspace import (
    IgnoreRules,
    WorkspaceCandidate,
    WorkspaceIndex,
    WorkspaceIndexer,
)
from dice_lsp.evals.suite import SuiteFile
from dice_lsp.evals.workspaces import suite_twins, twin_path, workspace_for

ADD = (
    "__global__ void add(const float* a, const float* b, float* c, int n) {\n"
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n) c[i] = a[i] + b[i];\n"
    "}\n")
SUB_BEFORE = (
    "__global__ void sub(const float* a, const float* b, float* c, int n) {\n"
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    ")
SUB_AFTER = "\n}\n"
TRUTH = "if (i < n) c[i] = a[i] + b[i];"
SCALE = (
    "__global__ void scale(float* x, float s, int n) {\n"
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n) x[i] *= s;\n"
    "}\n")
FILL = (  # no line of it follows a context like the hole's
    "__global__ void fill(float* x, int n) {\n"
    "    for (int k = 0; k < n; ++k) x[k] = 0;\n"
    "}\n")


def found(candidates: list[WorkspaceCandidate]) -> list[tuple[str, float, int, str]]:
    return [(c.text, c.score, c.files, c.path) for c in candidates]


@pytest.fixture()
def index() -> WorkspaceIndex:
    built = WorkspaceIndex()
    assert built.add("/w/add.cu", ADD)
    assert built.add("/w/sub.cu", SUB_BEFORE + TRUTH.replace("a[i] + b[i]", "a[i] - b[i]") + SUB_AFTER)
    return built


# -- the index ------------------------------------------------------------------------------------------------

def test_the_line_after_the_same_context_in_another_file_is_proposed(index: WorkspaceIndex) -> None:
    [best] = index.candidates(SUB_BEFORE, SUB_AFTER, limit=1, exclude="/w/sub.cu")
    assert (best.text, best.source, best.score, best.files, best.path) == (TRUTH, "workspace", 1.0, 1, "/w/add.cu")


def test_the_edited_file_is_never_proposed_from(index: WorkspaceIndex) -> None:
    proposed = index.candidates(SUB_BEFORE, SUB_AFTER, limit=5, exclude="/w/sub.cu")
    assert found(proposed) == [(TRUTH, 1.0, 1, "/w/add.cu")]
    everything = index.candidates(SUB_BEFORE, SUB_AFTER, limit=5)
    assert found(everything) == [(TRUTH, 1.0, 1, "/w/add.cu"), ("if (i < n) c[i] = a[i] - b[i];", 1.0, 1, "/w/sub.cu")]
    assert index.source(exclude="/w/sub.cu").candidates(SUB_BEFORE, SUB_AFTER, 5) == proposed


def test_several_paths_can_be_excluded(index: WorkspaceIndex) -> None:
    assert index.candidates(SUB_BEFORE, SUB_AFTER, exclude=["/w/sub.cu", "/w/add.cu"]) == []


def test_a_half_typed_line_gets_what_follows_what_was_typed(index: WorkspaceIndex) -> None:
    typed = "if (i < n) c[i] ="
    proposed = index.candidates(SUB_BEFORE + typed, SUB_AFTER, exclude="/w/sub.cu")
    assert found(proposed) == [(" a[i] + b[i];", 1.0, 1, "/w/add.cu")]
    assert index.candidates(SUB_BEFORE + "while (", SUB_AFTER, exclude="/w/sub.cu") == []


def test_a_hole_inside_a_line_gets_nothing(index: WorkspaceIndex) -> None:
    assert index.candidates(SUB_BEFORE + "c[i] = ", ";" + SUB_AFTER, exclude="/w/sub.cu") == []


def test_scores_are_the_document_sources_for_the_same_neighbours() -> None:
    """The same line after the same two neighbours scores the same in both sources (they are compared)."""
    other = ADD.replace("    if (i < n) c[i] = a[i] + b[i];\n}\n", "    if (i < n) c[i] = a[i] + b[i];\n  return;\n")
    built = WorkspaceIndex()
    built.add("/w/other.cu", other)
    [mine] = built.candidates(SUB_BEFORE, SUB_AFTER, limit=1)
    [theirs] = document.candidates(other + "\n" + SUB_BEFORE, SUB_AFTER, limit=1)
    assert (mine.text, mine.score) == (theirs.text, theirs.score) == (TRUTH, 0.7)


def test_a_line_after_the_same_context_in_several_files_counts_them() -> None:
    built = WorkspaceIndex()
    for name in ("b.cu", "a.cu", "c.cu"):
        built.add(f"/w/{name}", ADD if name != "c.cu" else SCALE)
    proposed = built.candidates(SUB_BEFORE, SUB_AFTER, limit=3)
    assert found(proposed) == [(TRUTH, 1.0, 2, "/w/a.cu"), ("if (i < n) x[i] *= s;", 1.0, 1, "/w/c.cu")]
    assert [c.rivals for c in proposed] == [1, 1], "each has the other as a rival at 1.0"
    built.remove("/w/c.cu")
    assert [(c.text, c.files, c.rivals) for c in built.candidates(SUB_BEFORE, SUB_AFTER)] == [(TRUTH, 2, 0)]


def test_whitespace_does_not_split_identical_lines() -> None:
    built = WorkspaceIndex()
    built.add("/w/a.cu", ADD)
    built.add("/w/b.cu", ADD.replace("c[i] = a[i] + b[i]", "c[i]=a[i]+b[i]"))
    [best] = built.candidates(SUB_BEFORE, SUB_AFTER, limit=3)
    assert (best.text, best.files) == (TRUTH, 2)


def test_neighbours_of_the_hole_are_never_proposed() -> None:
    built = WorkspaceIndex()
    built.add("/w/a.cu", "void f(int* x) {\n    x[0] = 1;\n    x[0] = 1;\n    x[1] = 2;\n}\n")
    proposed = built.candidates("void g(int* x) {\n    x[0] = 1;\n    ", "\n}\n", limit=5)
    assert [c.text for c in proposed] == ["x[1] = 2;"]


def test_a_similar_context_is_found_through_rare_words() -> None:
    """No line of the workspace is the hole's above line, but one shares its rare words: proposed, scored by
    the similarity of the neighbours."""
    built = WorkspaceIndex()
    built.add("/w/a.cu", "float acc = warp_reduce_sum(partial_total);\nif (lane == 0) out[warp] = acc;\n")
    [best] = built.candidates("x();\nfloat v = warp_reduce_sum(partial_total);\n", "", limit=1)
    above = document.similarity(document.Line("float v = warp_reduce_sum(partial_total);"),
                                document.Line("float acc = warp_reduce_sum(partial_total);"))
    assert (best.text, best.score) == ("if (lane == 0) out[warp] = acc;", round(0.7 * above, 4))


def test_removal_and_update(index: WorkspaceIndex) -> None:
    assert index.remove("/w/add.cu")
    assert index.candidates(SUB_BEFORE, SUB_AFTER, exclude="/w/sub.cu") == []
    assert not index.remove("/w/add.cu")
    index.add("/w/add.cu", SCALE)
    index.add("/w/add.cu", ADD.replace("a[i] + b[i]", "a[i] * b[i]"))
    assert found(index.candidates(SUB_BEFORE, SUB_AFTER, exclude="/w/sub.cu")) == [
        ("if (i < n) c[i] = a[i] * b[i];", 1.0, 1, "/w/add.cu")]
    assert index.paths() == ["/w/sub.cu", "/w/add.cu"]


def test_remove_under_a_folder() -> None:
    built = WorkspaceIndex()
    for path in ("/w/k/a.cu", "/w/k/b/c.cu", "/w/kk.cu"):
        built.add(path, ADD)
    assert built.remove_under("/w/k") == 2
    assert built.paths() == ["/w/kk.cu"]


def test_dead_postings_are_swept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ws, "_MIN_SWEEP", 0)
    built = WorkspaceIndex()
    built.add("/w/keep.cu", SCALE)
    for _ in range(5):
        built.add("/w/add.cu", ADD)
    live = set(built._files)
    refs = [r for table in (built._lines, built._words) for key in table for r in ws._postings(table, key)]
    assert {r >> ws._POS_BITS for r in refs} == live
    assert found(built.candidates(SUB_BEFORE, SUB_AFTER)) == [(TRUTH, 1.0, 1, "/w/add.cu"),
                                                             ("if (i < n) x[i] *= s;", 1.0, 1, "/w/keep.cu")]


def test_lookups_while_another_thread_indexes() -> None:
    built = WorkspaceIndex()
    built.add("/w/add.cu", ADD)
    errors: list[BaseException] = []

    def churn() -> None:
        try:
            for k in range(200):
                built.add(f"/w/fill{k % 7}.cu", FILL)
                if k % 3 == 0:
                    built.remove(f"/w/fill{(k + 1) % 7}.cu")
        except BaseException as exc:  # reported below
            errors.append(exc)

    thread = threading.Thread(target=churn)
    thread.start()
    answers = []
    while thread.is_alive():
        answers.append(built.candidates(SUB_BEFORE, SUB_AFTER, limit=1)[0].text)
    thread.join()
    assert errors == [] and set(answers) <= {TRUTH}
    assert found(built.candidates(SUB_BEFORE, SUB_AFTER, limit=1)) == [(TRUTH, 1.0, 1, "/w/add.cu")]


# -- bounds ---------------------------------------------------------------------------------------------------

def test_huge_minified_and_generated_files_are_not_indexed() -> None:
    built = WorkspaceIndex(max_file_bytes=len(ADD) + 10)
    assert not built.add("/w/huge.cu", ADD * 2)
    assert built.add("/w/add.cu", ADD)
    unbounded = WorkspaceIndex()
    assert not unbounded.add("/w/min.cu", "int x;\n" + "int y = 1;" * 100)  # a mean line of 503 characters
    assert not unbounded.add("/w/gen.h", "// @generated by a tool\n" + ADD)
    assert not unbounded.add("/w/empty.cu", "\n  \n")
    assert (built.paths(), unbounded.paths()) == (["/w/add.cu"], [])


def test_a_file_grown_past_the_limit_is_forgotten() -> None:
    built = WorkspaceIndex(max_file_bytes=len(ADD) + 10)
    built.add("/w/add.cu", ADD)
    assert not built.add("/w/add.cu", ADD * 2)
    assert built.paths() == [] and built.lines == 0


def test_the_file_cap_evicts_the_least_recently_added_or_touched() -> None:
    built = WorkspaceIndex(max_files=2)
    built.add("/w/a.cu", ADD)
    built.add("/w/b.cu", SCALE)
    built.touch("/w/a.cu")  # opened in the editor: kept
    built.add("/w/c.cu", SCALE)
    assert built.paths() == ["/w/a.cu", "/w/c.cu"]


def test_the_line_cap_evicts_until_the_new_file_fits() -> None:
    built = WorkspaceIndex(max_lines=8)
    built.add("/w/a.cu", ADD)  # 4 lines
    built.add("/w/b.cu", SCALE)  # 4 lines
    built.add("/w/c.cu", ADD + SCALE)  # 8 lines: both others go
    assert (built.paths(), built.lines) == (["/w/c.cu"], 8)
    assert not built.add("/w/d.cu", ADD * 3)  # more lines than the whole cap
    assert built.paths() == ["/w/c.cu"]


# -- ignore rules ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("pattern", "path", "is_dir", "verdict"), [
    ("build/", "build", True, True),
    ("build/", "build", False, None),  # a file named build
    ("build/", "src/build", True, True),  # no slash inside: any depth
    ("/build", "src/build", True, None),  # anchored
    ("*.gen.cu", "a/b/x.gen.cu", False, True),
    ("src/*.cu", "src/a.cu", False, True),
    ("src/*.cu", "src/sub/a.cu", False, None),  # * stops at a slash
    ("**/tmp", "a/b/tmp", True, True),
    ("a/**/b.cu", "a/x/y/b.cu", False, True),
    ("a/**/b.cu", "a/b.cu", False, True),
    ("out/**", "out/x/y.cu", False, True),
    ("k?.cu", "k1.cu", False, True),
    ("k[0-2].cu", "k3.cu", False, None),
    ("k[!0-2].cu", "k3.cu", False, True),
    ("\\#x.cu", "#x.cu", False, True),
    ("# a comment", "# a comment", False, None),
])
def test_gitignore_patterns(pattern: str, path: str, is_dir: bool, verdict: bool | None) -> None:
    assert IgnoreRules([pattern]).match(path, is_dir) is verdict


def test_the_last_matching_pattern_wins() -> None:
    rules = IgnoreRules(["*.gen.cu", "!keep.gen.cu"])
    assert (rules.match("a.gen.cu", False), rules.match("keep.gen.cu", False)) == (True, False)


# -- the background indexer -----------------------------------------------------------------------------------

def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def indexed(indexer: WorkspaceIndexer) -> list[str]:
    assert indexer.wait(30)
    return sorted(os.path.relpath(p, indexer.root) for p in indexer.index.paths())


@pytest.fixture()
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    write(root, {
        ".gitignore": "build/\n*.gen.cu\n!keep.gen.cu\n/top_only.cu\n",
        "src/add.cu": ADD,
        "src/sub.cu": SUB_BEFORE + SUB_AFTER,
        "src/x.gen.cu": ADD,
        "src/keep.gen.cu": FILL,
        "src/top_only.cu": FILL,
        "top_only.cu": FILL,
        "src/vendor/.gitignore": "*.cuh\n",
        "src/vendor/lib.cuh": ADD,
        "src/vendor/lib.h": FILL,
        "build/gen.cu": ADD,
        "node_modules/m/x.cu": ADD,
        ".cache/x.cu": ADD,
        "notes.txt": ADD,
        "cmake-build/out.cu": FILL,  # a build folder no ignore file names: indexed
        ".git/info/exclude": "cmake-build/\n",
    })
    return root


def test_the_walk_respects_ignore_files(tree: Path) -> None:
    reports: list[tuple[int, int]] = []
    indexer = WorkspaceIndexer(tree, WorkspaceIndex(), trusted=True, progress=lambda d, t: reports.append((d, t)))
    indexer.start()
    assert indexed(indexer) == ["src/add.cu", "src/keep.gen.cu", "src/sub.cu", "src/top_only.cu",
                                "src/vendor/lib.h"]
    assert reports[0] == (0, 5) and reports[-1] == (5, 5)
    indexer.stop()


def test_without_git_info_exclude_an_unignored_build_folder_is_indexed(tree: Path) -> None:
    (tree / ".git" / "info" / "exclude").unlink()
    indexer = WorkspaceIndexer(tree, WorkspaceIndex(), trusted=True)
    indexer.start()
    assert "cmake-build/out.cu" in indexed(indexer)
    indexer.stop()


def test_symbolic_links_are_not_followed(tmp_path: Path) -> None:
    root, outside = tmp_path / "ws", tmp_path / "outside"
    write(root, {"a.cu": ADD})
    write(outside, {"secret.cu": SCALE})
    (root / "linked").symlink_to(outside, target_is_directory=True)
    (root / "linked.cu").symlink_to(outside / "secret.cu")
    indexer = WorkspaceIndexer(root, WorkspaceIndex(), trusted=True)
    indexer.start()
    indexer.changed(root / "linked.cu")  # the watcher resolves links: outside the root, refused
    indexer.changed(root / "linked" / "secret.cu")
    assert indexed(indexer) == ["a.cu"]
    indexer.stop()


def test_changes_on_disk_and_in_the_editor_update_the_index(tree: Path) -> None:
    indexer = WorkspaceIndexer(tree, WorkspaceIndex(), trusted=True)
    indexer.start()
    indexer.wait(30)
    sub = str(tree / "src" / "sub.cu")
    first = indexer.index.candidates(SUB_BEFORE, SUB_AFTER, limit=1, exclude=sub)
    assert found(first) == [(TRUTH, 1.0, 1, str(tree / "src" / "add.cu"))]

    (tree / "src" / "add.cu").write_text(ADD.replace("a[i] + b[i]", "a[i] * b[i]"))  # saved elsewhere
    indexer.changed(tree / "src" / "add.cu")
    indexer.wait(30)
    [best] = indexer.index.candidates(SUB_BEFORE, SUB_AFTER, limit=1, exclude=sub)
    assert best.text == "if (i < n) c[i] = a[i] * b[i];"

    indexer.changed(tree / "src" / "add.cu", text=ADD.replace("a[i] + b[i]", "a[i] / b[i]"))  # unsaved buffer
    indexer.wait(30)
    [best] = indexer.index.candidates(SUB_BEFORE, SUB_AFTER, limit=1, exclude=sub)
    assert best.text == "if (i < n) c[i] = a[i] / b[i];"

    (tree / "src" / "add.cu").unlink()
    indexer.changed(tree / "src" / "add.cu")
    write(tree, {"src/new.cu": SCALE, "build/new.cu": ADD})
    indexer.changed(tree / "src" / "new.cu")
    indexer.changed(tree / "build" / "new.cu")  # ignored
    assert indexed(indexer) == ["src/keep.gen.cu", "src/new.cu", "src/sub.cu", "src/top_only.cu",
                                "src/vendor/lib.h"]
    assert found(indexer.index.candidates(SUB_BEFORE, SUB_AFTER, limit=1, exclude=sub)) == [
        ("if (i < n) x[i] *= s;", 1.0, 1, str(tree / "src" / "new.cu"))]
    indexer.stop()


def test_a_changed_gitignore_rescans(tree: Path) -> None:
    indexer = WorkspaceIndexer(tree, WorkspaceIndex(), trusted=True)
    indexer.start()
    indexer.wait(30)
    (tree / ".gitignore").write_text("build/\nsrc/\n")
    indexer.changed(tree / ".gitignore")
    assert indexed(indexer) == ["top_only.cu"]
    indexer.stop()


def test_an_untrusted_workspace_is_never_read(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reads: list[Path] = []
    real = Path.read_bytes

    def spy(self: Path) -> bytes:
        reads.append(self)
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", spy)
    indexer = WorkspaceIndexer(tree, WorkspaceIndex(), trusted=False)
    indexer.start()
    indexer.changed(tree / "src" / "add.cu")
    indexer.changed(tree / "src" / "add.cu", text=ADD)
    assert indexed(indexer) == [] and reads == []

    indexer.set_trusted(True)
    assert indexed(indexer) == ["src/add.cu", "src/keep.gen.cu", "src/sub.cu", "src/top_only.cu",
                                "src/vendor/lib.h"]
    indexer.set_trusted(False)
    assert indexed(indexer) == [] and len(indexer.index) == 0
    indexer.stop()


def test_binary_and_oversized_files_are_skipped_unread(tree: Path) -> None:
    (tree / "src" / "blob.cu").write_bytes(b"int x;\0\1\2")
    (tree / "src" / "big.cu").write_text(ADD * 10)
    indexer = WorkspaceIndexer(tree, WorkspaceIndex(max_file_bytes=len(ADD) * 5), trusted=True)
    indexer.start()
    assert "src/blob.cu" not in indexed(indexer) and "src/big.cu" not in indexed(indexer)
    indexer.stop()


# -- the suite's workspaces -----------------------------------------------------------------------------------

def suite_file(path: str, text: str, source: str = "onnxruntime") -> SuiteFile:
    return SuiteFile(id=path, source=source, path=path, license="MIT", text=text, compiles=None)


def test_twin_paths_ignore_the_backend() -> None:
    assert twin_path("onnxruntime-1.21.0/onnxruntime/core/providers/cuda/math/softmax_impl.cu") == \
        twin_path("onnxruntime-1.21.0/onnxruntime/core/providers/rocm/math/softmax_impl.cu") == \
        "onnxruntime/core/providers/*/math/softmax.impl"
    assert twin_path("x-1/src/hip/foo_hip.cu") == twin_path("x-1/src/cuda/foo_cuda.cu")
    assert twin_path("x-1/src/a.cu") != twin_path("x-1/src/b.cu")


def test_suite_twins_by_path_or_shared_lines() -> None:
    mine = suite_file("o-1/cuda/k.cu", ADD)
    others = [suite_file("o-1/rocm/k.cu", "int unrelated;\n"),
              suite_file("o-1/other/copy.cu", ADD.replace("add", "plus") + SCALE),
              suite_file("o-1/cuda/fill.cu", FILL)]
    assert suite_twins(mine, others) == ["o-1/rocm/k.cu", "o-1/other/copy.cu"]


def test_suite_workspaces_exclude_the_file_and_optionally_its_twins() -> None:
    cuda = "onnxruntime-1.21.0/onnxruntime/core/providers/cuda/atomic/common.cuh"
    rocm = "onnxruntime-1.21.0/onnxruntime/core/providers/rocm/atomic/common.cuh"
    with_twins = workspace_for("onnxruntime/0016", "dev")
    assert with_twins.exclude == (cuda,) and rocm in with_twins.index
    without = workspace_for("onnxruntime/0016", "dev", twins=False).exclude
    assert isinstance(without, tuple) and without[0] == cuda and rocm in without
    assert workspace_for("onnxruntime/0016", "dev").index is workspace_for("onnxruntime/0025", "dev").index


# -- the similarity is the document source's ------------------------------------------------------------------

@pytest.mark.parametrize(("mine", "theirs"), [
    (TRUTH, "if (i < n) c[i] = a[i] - b[i];"),
    ("int i = blockIdx.x * blockDim.x + threadIdx.x;", "int j = threadIdx.x;"),
    ("x = x + x + x;", "x = x;"),
    ("}", "{"),
    ("a+b", "a + b"),
])
def test_similarity_is_the_document_sources(mine: str, theirs: str) -> None:
    assert ws._Near(mine).similarity(theirs) == document.similarity(document.Line(mine), document.Line(theirs))


def test_a_rescan_reads_only_changed_files(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    indexer = WorkspaceIndexer(tree, WorkspaceIndex(), trusted=True)
    indexer.start()
    indexer.wait(30)
    reads: list[str] = []
    real = Path.read_bytes

    def spy(self: Path) -> bytes:
        reads.append(self.name)
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", spy)
    (tree / "src" / "add.cu").write_text(ADD + "\n// touched\n")
    indexer.start()
    indexer.wait(30)
    assert reads == ["add.cu"]
    indexer.stop()


def test_a_folder_created_or_moved_in_is_indexed(tree: Path) -> None:
    indexer = WorkspaceIndexer(tree, WorkspaceIndex(), trusted=True)
    indexer.start()
    indexer.wait(30)
    write(tree, {"lib/k/a.cu": SCALE, "lib/k/b.cuh": FILL, "lib/k/x.gen.cu": ADD})
    indexer.changed(tree / "lib")
    assert [p for p in indexed(indexer) if p.startswith("lib")] == ["lib/k/a.cu", "lib/k/b.cuh"]
    (tree / "lib" / "k" / "a.cu").rename(tree / "a.cu")
    (tree / "lib" / "k" / "b.cuh").unlink()
    (tree / "lib" / "k" / "x.gen.cu").unlink()
    (tree / "lib" / "k").rmdir()
    indexer.changed(tree / "lib" / "k")  # a folder deleted
    assert [p for p in indexed(indexer) if p.startswith("lib")] == []
    indexer.stop()


def test_the_edited_file_is_excluded_through_a_link_to_its_folder(tree: Path, tmp_path: Path) -> None:
    """The editor may name the file through a linked folder; the indexer names it by its resolved path."""
    (tmp_path / "alias").symlink_to(tree, target_is_directory=True)
    indexer = WorkspaceIndexer(tree, WorkspaceIndex(), trusted=True)
    indexer.start()
    indexer.wait(30)
    indexer.index.add(tree / "src" / "sub.cu", SUB_BEFORE + "if (i < n) c[i] = 0;" + SUB_AFTER)
    proposed = indexer.index.candidates(SUB_BEFORE, SUB_AFTER, limit=10, exclude=tmp_path / "alias" / "src" / "sub.cu")
    assert found(proposed[:1]) == [(TRUTH, 1.0, 1, str(tree / "src" / "add.cu"))]
    assert "if (i < n) c[i] = 0;" not in [c.text for c in proposed]
    indexer.stop()
