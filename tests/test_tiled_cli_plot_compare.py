"""`mipsched plot ratree.json` (the mesh picture) and `mipsched compare --hw set-4x4` on a
tiled machine: the picture's data against the evaluation, whole files, the compare rows
against a re-evaluation of their trees, and one-line errors without files."""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mipsched.cli import app
from mipsched.cli_tiled import load_ratree, ratree_document
from mipsched.hw.tiled import TiledHardware, load_tiled_hardware
from mipsched.report.mesh_plot import MAX_PANELS, mesh_picture, save_mesh_plot, shown_panels
from mipsched.report.tiled_compare import COLUMNS
from mipsched.solve.tiled_compare import compare_tiled, tiled_methods_and_baseline
from mipsched.tiled.bound import tiled_bounds
from mipsched.tiled.evaluate import Evaluation, evaluate_tree
from mipsched.tiled.ratree import Cut, Leaf, RaTree, check_tree
from mipsched.tiled.search import init_tree, search
from mipsched.workload import zoo
from mipsched.workload.graph import Workload

runner = CliRunner()
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def hw() -> TiledHardware:
    return load_tiled_hardware("set-4x4")


def _chain5_trees() -> dict[str, RaTree]:
    """Hand trees of chain5, batch 2: S Cuts with sub-batches, a T Cut inside an S Cut,
    a root with sub-batches."""
    leaf = [Leaf(n) for n in zoo.get("chain5", 2).layers]
    return {
        "s3-t2": RaTree(Cut("T", (Cut("S", tuple(leaf[:3]), 2), Cut("T", tuple(leaf[3:]))),
                            1), 2),
        "s-of-t": RaTree(Cut("T", (Cut("S", (leaf[0], Cut("T", tuple(leaf[1:3])))),
                                   Cut("S", tuple(leaf[3:]), 2))), 2),
        "root-sb2": RaTree(Cut("T", (Cut("S", tuple(leaf[:3])), Cut("T", tuple(leaf[3:]))),
                               2), 2),
    }


@pytest.fixture(scope="module")
def cases(hw: TiledHardware) -> list[tuple[Workload, RaTree, Evaluation]]:
    """(workload, tree, evaluation): the hand trees of chain5 and a short search of
    resblock (shared by the tests of the picture's data)."""
    found = []
    wl = zoo.get("chain5", 2)
    for tree in _chain5_trees().values():
        check_tree(tree, wl, hw.n_tiles)
        ev = evaluate_tree(hw, wl, tree)
        assert ev is not None
        found.append((wl, tree, ev))
    rb = zoo.get("resblock", 2)
    result = search(hw, rb, "set", seed=1, rounds_per_layer=4)
    found.append((rb, result.tree, result.evaluation))
    return found


def test_the_tiles_of_every_layer_are_its_allocated_cores(hw, cases) -> None:
    """The picture's tile -> layers map (from the S Cuts' allocation) puts each layer on
    exactly the cores its leaf was evaluated on, and S Cut siblings on disjoint tiles."""
    for wl, tree, ev in cases:
        pic = mesh_picture(hw, wl, tree, "set", ev)
        assert [p.layers for p in pic.panels] == [tuple(s.layers) for s in ev.segments]
        for panel in pic.panels:
            for layer in panel.layers:
                drawn = {t for t, names in panel.tiles.items() if layer in names}
                assert drawn == {t for t, _ in ev.leaves[layer].layout.tiles}, layer
            assert set(panel.tiles) <= {(x, y) for x in range(4) for y in range(4)}
    wl, tree, ev = cases[0]  # S(conv1, conv2, conv3) then T(conv4, conv5)
    first, second = mesh_picture(hw, wl, tree, evaluation=ev).panels
    assert all(len(names) == 1 for names in first.tiles.values())
    assert len(first.tiles) == 16 and sorted({n for v in first.tiles.values() for n in v}) \
        == ["conv1", "conv2", "conv3"]
    assert all(names == ("conv4", "conv5") for names in second.tiles.values())


def test_the_link_loads_of_every_panel_are_its_segment(hw, cases) -> None:
    """Per segment, the links' bytes (the leaves' records x the sub-batches above them)
    reproduce the evaluation's busiest link, DRAM bytes and byte-hops; the segments x the
    root's sub-batches are the whole tree's record."""
    for wl, tree, ev in cases:
        pic = mesh_picture(hw, wl, tree, "", ev)
        for panel, seg in zip(pic.panels, ev.segments, strict=True):
            assert panel.max_link_bytes == seg.max_link_bytes
            assert (panel.dram_bytes, panel.byte_hops, panel.cycles) == (
                seg.dram_bytes, seg.byte_hops, seg.cycles)
            assert all(n > 0 for n in panel.links.values())
        n = tree.root.subbatches
        total: dict = {}
        for panel in pic.panels:
            for link, b in panel.links.items():
                total[link] = total.get(link, 0) + b * n
        assert total == ev.record.links
        assert pic.latency == ev.latency and pic.edp == pytest.approx(ev.edp)


def _solve(tmp_path: Path, net: str, batch: int) -> Path:
    out = tmp_path / net
    done = runner.invoke(app, ["solve", net, "--hw", "set-4x4", "--batch", str(batch),
                               "--time-limit", "20", "--out", str(out)])
    assert done.exit_code == 0, done.output
    return out / "ratree.json"


def _assert_whole(path: Path) -> None:
    """A PNG ends with its IEND chunk; an SVG parses as XML."""
    data = path.read_bytes()
    if path.suffix == ".png":
        assert data.startswith(PNG_MAGIC) and data.endswith(b"IEND\xaeB`\x82")
    else:
        assert ET.fromstring(data).tag.endswith("svg")


@pytest.mark.parametrize(("net", "batch"), [("chain5", 2), ("resblock", 2)])
def test_plot_of_a_solved_tree_writes_whole_pictures(tmp_path, net, batch) -> None:
    ratree = _solve(tmp_path, net, batch)
    saved = json.loads(ratree.read_text())
    assert saved["network"]["workload"]["name"] == net  # embedded: replays without source
    for suffix in ("png", "svg"):
        picture = tmp_path / f"mesh.{suffix}"
        done = runner.invoke(app, ["plot", str(ratree), "-o", str(picture)])
        assert done.exit_code == 0, done.output
        _assert_whole(picture)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["mesh.png", "mesh.svg", net])


def test_a_ratree_without_the_embedded_network_reads_it_from_the_zoo(tmp_path, hw) -> None:
    wl = zoo.get("chain5", 2)
    tree = _chain5_trees()["s-of-t"]
    doc = ratree_document(wl, hw, "hand", tree, {})
    del doc["network"]["workload"]
    path = tmp_path / "ratree.json"
    path.write_text(json.dumps(doc))
    read = load_ratree(path)
    assert (read.tree, read.method, read.hw) == (tree, "hand", hw)
    assert read.workload.digest() == wl.digest()


@pytest.fixture(scope="module")
def resnet50(hw) -> tuple[Workload, RaTree, Evaluation]:
    wl = zoo.get("resnet50", 8)
    tree, ev = init_tree(hw, wl)
    return wl, tree, ev


def test_resnet50_b8_shows_its_longest_segments(tmp_path, hw, resnet50) -> None:
    """The layer-by-layer tree of ResNet-50 b8: 72 segments, the reference's start
    latency; the MAX_PANELS longest are drawn, in order; whole PNG and SVG (6 panels)."""
    wl, tree, ev = resnet50
    assert ev.latency == 20_266_192  # the reference's init tree (docs/set-model.md)
    pic = mesh_picture(hw, wl, tree, "init", ev)
    shown = shown_panels(pic)
    assert len(pic.panels) == 72 and len(shown) == MAX_PANELS
    assert [p.index for p in shown] == sorted(p.index for p in shown)
    assert min(p.cycles for p in shown) >= max(
        p.cycles for p in pic.panels if p not in shown)
    for panel in pic.panels:
        (layer,) = panel.layers
        assert set(panel.tiles) == {t for t, _ in ev.leaves[layer].layout.tiles}
    for suffix in ("png", "svg"):
        save_mesh_plot(tmp_path / f"r50.{suffix}", pic, max_panels=6)
        _assert_whole(tmp_path / f"r50.{suffix}")


@pytest.mark.slow
def test_resnet50_b8_searched_tree_plots_from_the_cli(tmp_path, hw) -> None:
    wl = zoo.get("resnet50", 8)
    found = search(hw, wl, "set", seed=0, rounds_per_layer=1)
    path = tmp_path / "ratree.json"
    path.write_text(json.dumps(ratree_document(wl, hw, "set", found.tree, {})))
    for suffix in ("png", "svg"):
        done = runner.invoke(app, ["plot", str(path), "-o", str(tmp_path / f"m.{suffix}")])
        assert done.exit_code == 0, done.output
        _assert_whole(tmp_path / f"m.{suffix}")


# --- bad input: one line, exit 2, nothing written ----------------------------------------------
def _broken(doc: dict, how: str) -> dict:
    """`doc` (the s3-t2 tree of chain5) spoilt in one way."""
    if how == "digest":
        doc["network"]["digest"] = "0" * 16
    elif how == "batch":
        doc["network"]["batch"] = 4
    elif how == "order":  # leaves conv1, conv2, conv4, conv3, conv5
        kids = doc["tree"]["root"]["children"]
        kids[0]["children"][2], kids[1]["children"][0] = {"layer": "conv4"}, {"layer": "conv3"}
    elif how == "missing":
        doc["tree"]["root"]["children"].pop()
    elif how == "version":
        doc["version"] = 7
    elif how == "hardware":
        doc["hardware"]["mesh"]["cols"] = 0
    return doc


@pytest.mark.parametrize(("how", "says"), [
    ("digest", "digest mismatch"), ("batch", "digest mismatch"),
    ("order", "topological order"), ("missing", "in no leaf"),
    ("version", "unsupported version"), ("hardware", "mesh.cols")])
def test_a_bad_ratree_is_one_line_and_writes_nothing(tmp_path, hw, how, says) -> None:
    wl = zoo.get("chain5", 2)
    doc = _broken(ratree_document(wl, hw, "hand", _chain5_trees()["s3-t2"], {}), how)
    path = tmp_path / "ratree.json"
    path.write_text(json.dumps(doc))
    done = runner.invoke(app, ["plot", str(path), "-o", str(tmp_path / "m.png")])
    assert done.exit_code == 2
    assert len(done.stderr.splitlines()) == 1 and says in done.stderr, done.stderr
    assert str(path) in done.stderr and "Traceback" not in done.output
    assert [p.name for p in tmp_path.iterdir()] == ["ratree.json"]


def test_other_plot_errors_are_one_line(tmp_path, hw) -> None:
    doc = ratree_document(zoo.get("chain5", 2), hw, "hand", _chain5_trees()["s3-t2"], {})
    path = tmp_path / "ratree.json"
    path.write_text(json.dumps(doc))
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"format": "something-else"}))
    for args in (["-o", str(tmp_path / "m.pdf")],
                 ["-o", str(tmp_path / "m.png"), "--solution", "reference"]):
        done = runner.invoke(app, ["plot", str(path), *args])
        assert done.exit_code == 2 and len(done.stderr.splitlines()) == 1, done.stderr
    done = runner.invoke(app, ["plot", str(other), "-o", str(tmp_path / "m.png")])
    assert done.exit_code == 2 and len(done.stderr.splitlines()) == 1, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.json", "ratree.json"]


# --- compare ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def compared(hw) -> list:
    nets = [zoo.get("chain5", 2), zoo.get("resblock", 2)]
    return compare_tiled(nets, ["lp", "set", "ls"], hw, None, seed=3, rounds_per_layer=6)


def test_compare_rows_re_evaluate_to_their_numbers(hw, compared) -> None:
    assert [(r.network, r.method) for r in compared] == [
        (n, m) for n in ("chain5", "resblock") for m in ("lp", "set", "ls")]
    for r in compared:
        wl = zoo.get(r.network, r.batch)
        check_tree(r.tree, wl, hw.n_tiles)
        ev = evaluate_tree(hw, wl, r.tree)
        assert r.status == "feasible" and r.rounds_done == 6 * len(wl.layers)
        assert (r.latency_cycles, r.energy_pj, r.edp) == (ev.latency, ev.energy_pj, ev.edp)
        assert (r.dram_bytes, r.n_segments) == (ev.record.dram_bytes, len(ev.segments))
        bounds = tiled_bounds(wl, hw)
        assert r.lower_bound_cycles == bounds.latency.value <= r.latency_cycles
        assert r.gap == pytest.approx((r.latency_cycles - r.lower_bound_cycles)
                                      / r.latency_cycles)
        assert 0 <= r.edp_gap < 1 and r.edp_lower_bound == pytest.approx(bounds.edp)


def test_compare_ratios_are_against_the_first_method(compared) -> None:
    for net in ("chain5", "resblock"):
        rows = [r for r in compared if r.network == net]
        base = rows[0]
        assert base.method == "lp" and (base.speedup, base.energy_ratio, base.edp_ratio) \
            == (1.0, 1.0, 1.0)
        for r in rows:
            assert r.edp_ratio == pytest.approx(r.edp / base.edp)
            assert r.edp_ratio == pytest.approx(r.energy_ratio / r.speedup)
            assert math.isclose(r.speedup, base.latency_cycles / r.latency_cycles)


def test_compare_cli_writes_the_tables(tmp_path) -> None:
    out = tmp_path / "cmp"
    done = runner.invoke(app, ["compare", "chain3", "--hw", "set-4x4", "--methods",
                               "set,lp", "--baseline", "lp", "--time-limit", "1", "--out",
                               str(out), "--json"])
    assert done.exit_code == 0, done.output
    rows = json.loads(done.stdout)
    assert [r["method"] for r in rows] == ["set", "lp"] and rows[1]["edp_ratio"] == 1.0
    assert set(rows[0]) == set(COLUMNS)
    csv_lines = (out / "compare.csv").read_text().splitlines()
    assert csv_lines[0] == ",".join(COLUMNS) and len(csv_lines) == 3
    md = (out / "compare.md").read_text().splitlines()
    assert len(md) == 4 and md[2].startswith("| chain3 | 1 | set | feasible |")
    shown = runner.invoke(app, ["compare", "chain3", "--hw", "set-4x4", "--methods", "ls",
                                "--time-limit", "1", "--out", str(out)])
    assert shown.exit_code == 0 and "ratios vs ls" in shown.stdout


@pytest.mark.parametrize(("methods", "extra", "says"), [
    ("set,sa", [], "'sa' does not schedule a tiled machine"),
    ("bound", [], "'bound' does not schedule a tiled machine"),
    ("set,ls", ["--baseline", "lp"], "--baseline 'lp' is not among the --methods"),
    ("set", ["--objective", "speed"], "--objective: 'speed'")])
def test_compare_errors_are_one_line_without_files(tmp_path, methods, extra, says) -> None:
    out = tmp_path / "cmp"
    done = runner.invoke(app, ["compare", "chain3", "--hw", "set-4x4", "--methods", methods,
                               *extra, "--out", str(out)])
    assert done.exit_code == 2 and says in done.stderr, done.stderr
    assert len(done.stderr.splitlines()) == 1
    assert not out.exists()


def test_the_default_methods_are_every_tiled_method() -> None:
    assert tiled_methods_and_baseline(None, None) == (["set", "ls", "lp"], "set")


def test_a_mesh_plot_that_fails_leaves_no_file(tmp_path, hw, monkeypatch) -> None:
    from matplotlib.figure import Figure

    doc = ratree_document(zoo.get("chain5", 2), hw, "hand", _chain5_trees()["s3-t2"], {})
    path = tmp_path / "ratree.json"
    path.write_text(json.dumps(doc))

    def broken(self, fname, **kw) -> None:
        Path(fname).write_bytes(PNG_MAGIC + b"half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Figure, "savefig", broken)
    done = runner.invoke(app, ["plot", str(path), "-o", str(tmp_path / "m.png")])
    assert done.exit_code == 2 and "No space left on device" in done.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["ratree.json"]
