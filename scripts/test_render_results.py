#!/usr/bin/env python3
"""Tests of scripts/render-results (run by scripts/test):

    python3 -m unittest discover -s scripts -p 'test_*.py'

Each test builds a small repository in a temporary directory (results/*.json
as scripts/result writes them, Markdown files with tables and spans) and
checks what the renderer writes and when --check fails.
"""
import contextlib
import importlib.machinery
import importlib.util
import io
import json
import os
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))


def load(name, file):
    loader = importlib.machinery.SourceFileLoader(name, os.path.join(HERE, file))
    spec = importlib.util.spec_from_loader(name, loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


rr = load("render_results", "render-results")

RESULT = {
    "name": "sim/high",
    "command": ["flock", "/work/.kernel.lock", "nice", "-n", "19", "target/release/appflow",
                "sim", "--workload", "high", "--policy", "android,appflow"],
    "date": "2026-11-26T14:00:00Z",
    "commit": "0123456789abcdef0123456789abcdef01234567",
    "dirty": False,
    "machine": {"cpus": 2},
    "wall_s": 1.5,
    "cpu_s": 1.4,
    "output": {"results": [
        {"policy": "android", "summary": {"cold_launch_ms": {"mean": 3430.0}, "kills": 16}},
        {"policy": "appflow", "summary": {"cold_launch_ms": {"mean": 1871.4}, "kills": 21}},
    ]},
}

# A page's prose, so that its template stays under a third of it.
PROSE = "\nThe prose a reader reads, between the figures. " * 24

TABLE = """# Title

<!-- results:sim
| cold launch, `high` | sim/high | appflow {ratio(output.results[policy=appflow].summary.cold_launch_ms.mean, output.results[policy=android].summary.cold_launch_ms.mean):.2f}× android ({output.results[policy=appflow].summary.cold_launch_ms.mean:,.0f} vs {output.results[policy=android].summary.cold_launch_ms.mean:,.0f} ms) |
-->
<!-- /results -->

Kills rose to <!-- result:sim/high {output.results[policy=appflow].summary.kills} -->?<!-- /result -->.
""" + PROSE


class Repo:
    def __init__(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.top = self.tmp.name
        os.makedirs(os.path.join(self.top, "results", "sim"))
        os.makedirs(os.path.join(self.top, "docs"))
        self.result("sim/high", RESULT)

    def result(self, name, doc):
        with open(os.path.join(self.top, "results", name + ".json"), "w") as f:
            json.dump(doc, f)

    def write(self, rel, text):
        with open(os.path.join(self.top, rel), "w") as f:
            f.write(text)

    def read(self, rel):
        with open(os.path.join(self.top, rel)) as f:
            return f.read()

    def run(self, *args):
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = rr.main(list(args), top=self.top)
        return code, err.getvalue()


class RenderTest(unittest.TestCase):
    def setUp(self):
        self.repo = Repo()
        self.addCleanup(self.repo.tmp.cleanup)

    def test_renders_rows_and_spans_from_the_file(self):
        self.repo.write("README.md", TABLE)
        self.repo.write("docs/x.md", TABLE)
        self.assertEqual(self.repo.run()[0], 0)
        readme = self.repo.read("README.md")
        self.assertIn(
            "| [cold launch, `high`](results/sim/high.json) | appflow 0.55× android (1,871 vs 3,430 ms) "
            "| `appflow sim --workload high --policy android,appflow` | 2026-11-26, 0123456 |",
            readme,
        )
        self.assertIn("-->21<!-- /result -->", readme)
        # A page under docs/ links to the file from there.
        self.assertIn("](../results/sim/high.json)", self.repo.read("docs/x.md"))
        # Rendering again changes nothing, and --check passes.
        self.assertEqual(self.repo.run("--check")[0], 0)

    def test_check_fails_when_a_figure_differs_from_its_file(self):
        self.repo.write("README.md", TABLE)
        self.repo.run()
        text = self.repo.read("README.md")
        self.repo.write("README.md", text.replace("0.55×", "0.50×"))
        code, err = self.repo.run("--check")
        self.assertEqual(code, 1, err)
        self.assertIn("README.md", err)
        # --check writes nothing.
        self.assertIn("0.50×", self.repo.read("README.md"))
        # A new run behind the file: the rendered table is stale.
        self.repo.run()
        doc = dict(RESULT)
        doc["output"] = json.loads(json.dumps(RESULT["output"]))
        doc["output"]["results"][1]["summary"]["cold_launch_ms"]["mean"] = 1500.0
        self.repo.result("sim/high", doc)
        self.assertEqual(self.repo.run("--check")[0], 1)
        self.assertEqual(self.repo.run()[0], 0)
        self.assertIn("0.44× android", self.repo.read("README.md"))

    def test_a_row_typed_by_hand_fails_the_check(self):
        self.repo.write("README.md", TABLE)
        self.repo.run()
        text = self.repo.read("README.md").replace(
            "<!-- /results -->", "| typed | 0.1× | `appflow sim` | today |\n<!-- /results -->")
        self.repo.write("README.md", text)
        self.assertEqual(self.repo.run("--check")[0], 1)

    def test_missing_file_or_path_is_bad_input(self):
        self.repo.write("README.md", TABLE.replace("| sim/high |", "| sim/nope |"))
        code, err = self.repo.run("--check")
        self.assertEqual(code, 2)
        self.assertIn("results/sim/nope.json: no such result file", err)
        self.repo.write("README.md", TABLE.replace("policy=appflow", "policy=appfloww"))
        code, err = self.repo.run("--check")
        self.assertEqual(code, 2)
        self.assertIn("no element with policy=appfloww (there, policy: android, appflow)", err)
        self.repo.write("README.md", TABLE.replace(".kills}", ".killz}"))
        code, err = self.repo.run("--check")
        self.assertEqual(code, 2)
        self.assertIn("no key 'killz'", err)
        self.repo.write("README.md", "<!-- results:x\n| a | sim/high |\n-->\n<!-- /results -->\n")
        self.assertEqual(self.repo.run("--check")[0], 2)
        self.repo.write("README.md", "<!-- results:x\n| a | sim/high | {output} |\n")
        self.assertEqual(self.repo.run("--check")[0], 2)

    def test_add_appends_one_row_and_renders_it(self):
        self.repo.write("README.md", TABLE)
        self.repo.run()
        other = dict(RESULT, name="fleet/killer", output={"results": [{"policy": "appflow", "summary": {"kills": 3}}]})
        os.makedirs(os.path.join(self.repo.top, "results", "fleet"))
        self.repo.result("fleet/killer", other)
        code, err = self.repo.run("--add", "sim", "kills, `high`", "fleet/killer",
                                  "appflow {output.results[policy=appflow].summary.kills:.0f}")
        self.assertEqual(code, 0, err)
        text = self.repo.read("README.md")
        spec = text.split("-->", 1)[0]
        self.assertTrue(spec.endswith("| kills, `high` | fleet/killer | "
                                      "appflow {output.results[policy=appflow].summary.kills:.0f} |\n"), spec)
        self.assertIn("| [kills, `high`](results/fleet/killer.json) | appflow 3 | `appflow sim", text)
        self.assertIn("0.55× android", text)
        self.assertEqual(self.repo.run("--check")[0], 0)
        # A row that does not render, or an unknown table: exit 2, nothing written.
        for args in (("sim", "x", "fleet/killer", "{output.results[policy=stock].summary.kills}"),
                     ("sim", "x", "fleet/none", "{output}"),
                     ("nope", "x", "fleet/killer", "{wall_s}"),
                     ("sim", "a | b", "fleet/killer", "{wall_s}")):
            code, err = self.repo.run("--add", *args)
            self.assertEqual(code, 2, (args, err))
            self.assertEqual(self.repo.read("README.md"), text)
        self.assertEqual(self.repo.run("--add", "sim")[0], 2)

    def test_paths_lists_what_a_template_can_read(self):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            self.assertEqual(rr.main(["--paths", "sim/high"], top=self.repo.top), 0)
        self.assertIn("output.results[policy=appflow].summary.cold_launch_ms.mean = 1871.4\n", out.getvalue())
        self.assertEqual(self.repo.run("--paths", "sim/none")[0], 2)

    def test_check_fails_on_a_readme_over_150_lines(self):
        self.repo.write("README.md", TABLE)
        self.repo.run()
        rendered = self.repo.read("README.md")
        self.repo.write("README.md", rendered + "line\n" * (150 - rendered.count("\n")))
        self.assertEqual(self.repo.run("--check")[0], 0)
        self.repo.write("README.md", self.repo.read("README.md") + "one too many\n")
        code, err = self.repo.run("--check")
        self.assertEqual(code, 1)
        self.assertIn("README.md is 151 lines, over 150", err)

    def test_a_row_may_read_a_second_file(self):
        other = dict(RESULT, output={"results": [{"policy": "appflow", "summary": {"kills": 3}}]})
        self.repo.result("sim/other", other)
        self.repo.write("README.md", TABLE.replace(
            ".kills:.0f} |", ".kills:.0f} |").replace(
            "ms) |\n-->", "ms), other {@sim/other:output.results[policy=appflow].summary.kills} |\n-->"))
        self.assertEqual(self.repo.run()[0], 0, self.repo.run()[1])
        self.assertIn("ms), other 3 |", self.repo.read("README.md"))
        self.repo.write("README.md", TABLE.replace("ms) |\n-->", "ms) {@sim/none:output} |\n-->"))
        self.assertEqual(self.repo.run("--check")[0], 2)

    def test_markers_in_code_blocks_are_examples(self):
        example = "```markdown\n<!-- results:x\n| a | sim/nope | {output} |\n-->\n<!-- /results -->\n```\n"
        self.repo.write("docs/how.md", example + TABLE)
        self.assertEqual(self.repo.run()[0], 0)
        text = self.repo.read("docs/how.md")
        self.assertTrue(text.startswith(example))
        self.assertIn("0.55× android", text)

    def test_hand_typed_figures_fail_the_check_in_every_page(self):
        self.repo.write("README.md", TABLE)
        # A dated results log is history: its figures are typed.
        self.repo.write("docs/results-log-part.md", "A launch took 3,430 ms; `42 ms` in code.\n")
        self.assertEqual(self.repo.run()[0], 0)
        self.assertEqual(self.repo.run("--check")[0], 0)
        # Any other page of docs/ fails, with the mark or without.
        self.repo.write("docs/design.md", "A launch took 3,430 ms here; `42 ms` in code is fine.\n")
        code, err = self.repo.run("--check")
        self.assertEqual(code, 1, err)
        self.assertIn("docs/design.md:1: '3,430 ms'", err)
        self.assertNotIn("42 ms", err)
        self.repo.write("docs/design.md", "No figure.\n")
        self.repo.write("README.md", self.repo.read("README.md") + "\nappflow was 0.55× stock.\n")
        code, err = self.repo.run("--check")
        self.assertEqual(code, 1, err)
        self.assertIn(f"README.md:{13 + PROSE.count(chr(10))}: '0.55×'", err)
        self.repo.write("README.md", TABLE)
        self.repo.run()
        self.repo.write("docs/design.md", "<!-- figures: traced -->\nA launch took 3,430 ms.\n")
        code, err = self.repo.run("--check")
        self.assertEqual(code, 1, err)
        self.assertIn("docs/design.md:2: '3,430 ms'", err)
        found = [f for _, f in rr.untraced(
            "2.2× and 150 MB/s, 98.5 %, 12-15 min; not 60 apps, v1.2, 5.10, 2-core\n"
            "```\n1 ms\n```\n[x](a/5 ms.md) <!-- 3 s -->\n")]
        self.assertEqual(found, ["2.2×", "150 MB/s", "98.5 %", "12-15 min"])

    def test_a_page_is_checked_whole_and_a_traced_section_ends_at_its_next_heading(self):
        page = ("# Part\n\nDesign: a 100 ms tick, 4 KiB pages.\n\n## Results\n<!-- figures: traced -->\n"
                "Launches took 3,430 ms.\n\n### On this VM\n\nAnd 1.2× here.\n\n"
                "```\n## not a heading\n```\n7 ms in the code block's shadow.\n\n"
                "## Design again\n\nA 2 s window.\n")
        self.repo.write("README.md", TABLE)
        self.repo.write("docs/part.md", page)
        self.repo.run()
        code, err = self.repo.run("--check")
        self.assertEqual(code, 1)
        # The check holds for the whole page; the sections still count
        # apart for --untraced.
        loose = [line.split(": a figure")[0] for line in err.splitlines()]
        self.assertEqual(loose, ["render-results: docs/part.md:3: '100 ms'",
                                 "render-results: docs/part.md:3: '4 KiB'",
                                 "render-results: docs/part.md:7: '3,430 ms'",
                                 "render-results: docs/part.md:11: '1.2×'",
                                 "render-results: docs/part.md:16: '7 ms'",
                                 "render-results: docs/part.md:20: '2 s'"], err)
        self.assertEqual(rr.strict_lines("docs/x.md", "<!-- figures: traced -->\n# T\n## S"), {1, 2, 3})
        self.assertEqual(rr.strict_lines("docs/x.md", "# T\n## S\n"), set())

    def test_a_page_over_a_third_template_fails_the_check(self):
        self.repo.write("docs/x.md", TABLE.replace(PROSE, ""))
        self.repo.run()
        code, err = self.repo.run("--check")
        self.assertEqual(code, 1, err)
        self.assertIn("docs/x.md", err)
        self.assertIn("template, over a third", err)
        # The same figures with prose around them pass.
        self.repo.write("docs/x.md", TABLE)
        self.repo.run()
        self.assertEqual(self.repo.run("--check")[0], 0)
        # A spec shown in a code block is an example, not template.
        self.assertEqual(rr.template_bytes("```\n" + TABLE.replace(PROSE, "") + "```\n"), 0)
        self.assertGreater(rr.template_bytes(TABLE), 0)

    def seeds(self):
        for seed in (1, 2, 3):
            doc = json.loads(json.dumps(RESULT))
            doc["output"]["results"][1]["summary"]["kills"] = 20 + seed
            self.repo.result(f"sim/high-seed{seed}", doc)

    def test_a_rows_table_fills_one_template_per_row(self):
        self.seeds()
        self.repo.write("docs/x.md", """# Runs

<!-- results:seeds rows
file sim/high-seed$seed
set A = output.results[policy=appflow].summary
| seed | kills | vs android |
|---|---|---|
| $seed | {$A.kills} | {diff($A.kills, output.results[policy=android].summary.kills):+.0f} |
row seed=<1..2>
row seed=3 | **3** | {$A.kills} | n/a |
-->
<!-- /results -->
""" + PROSE)
        code, err = self.repo.run()
        self.assertEqual(code, 0, err)
        text = self.repo.read("docs/x.md")
        self.assertIn("-->\n| seed | kills | vs android |\n|---|---|---|\n"
                      "| [1](../results/sim/high-seed1.json) | 21 | +5 |\n"
                      "| [2](../results/sim/high-seed2.json) | 22 | +6 |\n"
                      "| [**3**](../results/sim/high-seed3.json) | 23 | n/a |\n<!-- /results -->", text)
        self.assertEqual(self.repo.run("--check")[0], 0)
        # A new run behind one file re-renders its row only.
        doc = json.loads(json.dumps(RESULT))
        doc["output"]["results"][1]["summary"]["kills"] = 30
        self.repo.result("sim/high-seed2", doc)
        self.assertEqual(self.repo.run("--check")[0], 1)
        self.repo.run()
        self.assertIn("| [2](../results/sim/high-seed2.json) | 30 | +14 |", self.repo.read("docs/x.md"))
        # A name not set is bad input; --add refuses a rows table.
        self.repo.write("docs/x.md", text.replace("{$A.kills} |", "{$B.kills} |", 1))
        code, err = self.repo.run("--check")
        self.assertEqual(code, 2)
        self.assertIn("$B is not set", err)
        self.repo.write("docs/x.md", text)
        code, err = self.repo.run("--add", "seeds", "x", "sim/high", "{wall_s}")
        self.assertEqual(code, 2)
        self.assertIn("rows table", err)

    def test_a_rows_spec_may_live_in_a_file_beside_the_page(self):
        self.seeds()
        os.makedirs(os.path.join(self.repo.top, "docs", "tables"))
        self.repo.write("docs/tables/x.rows", "[other]\nrow\n[seeds]\nfile sim/high-seed$s\n"
                        "| seed | kills |\n|---|---|\n| $s | {output.results[policy=appflow].summary.kills} |\n"
                        "row s=<1..3>\n")
        self.repo.write("docs/x.md", "# Runs\n\n<!-- results:seeds rows\nspec tables/x.rows\n-->\n<!-- /results -->\n")
        code, err = self.repo.run()
        self.assertEqual(code, 0, err)
        self.assertIn("| [3](../results/sim/high-seed3.json) | 23 |\n<!-- /results -->", self.repo.read("docs/x.md"))
        self.assertEqual(self.repo.run("--check")[0], 0)
        self.repo.write("docs/x.md", "<!-- results:nope rows\nspec tables/x.rows\n-->\n<!-- /results -->\n")
        code, err = self.repo.run("--check")
        self.assertEqual(code, 2)
        self.assertIn("no [nope] in docs/tables/x.rows", err)

    def test_add_appends_to_a_spec_kept_in_a_file(self):
        os.makedirs(os.path.join(self.repo.top, "docs", "tables"))
        self.repo.write("docs/tables/r.rows", "[core]\n| wall | sim/high | {wall_s} s |\n[other]\n")
        self.repo.write("README.md", "# T\n\n<!-- results:core\nspec docs/tables/r.rows\n-->\n<!-- /results -->\n")
        code, err = self.repo.run("--add", "core", "cpu", "sim/high", "{cpu_s} s")
        self.assertEqual(code, 0, err)
        self.assertEqual(self.repo.read("docs/tables/r.rows"),
                         "[core]\n| wall | sim/high | {wall_s} s |\n| cpu | sim/high | {cpu_s} s |\n[other]\n")
        self.assertIn("| [cpu](results/sim/high.json) | 1.4 s |", self.repo.read("README.md"))

    def test_set_names_a_text_for_the_spec_lines_below_it(self):
        os.makedirs(os.path.join(self.repo.top, "docs", "tables"))
        self.repo.write("docs/tables/r.rows",
                        "[core]\nset P = output.results[policy=$p].summary\nset p = android\n"
                        "| android | sim/high | {$P.kills} kills |\nset p = appflow\n"
                        "| appflow | sim/high | {$P.kills} kills |\n| typo | sim/high | {$Q.kills} |\n")
        self.repo.write("README.md", "# T\n\n<!-- results:core\nspec docs/tables/r.rows\n-->\n<!-- /results -->\n")
        code, err = self.repo.run()
        self.assertEqual(code, 2)
        self.assertIn("$Q is not set", err)
        self.repo.write("docs/tables/r.rows", self.repo.read("docs/tables/r.rows").replace("| typo | sim/high | {$Q.kills} |\n", ""))
        code, err = self.repo.run()
        self.assertEqual(code, 0, err)
        self.assertIn("| [android](results/sim/high.json) | 16 kills |", self.repo.read("README.md"))
        self.assertIn("| [appflow](results/sim/high.json) | 21 kills |", self.repo.read("README.md"))

    def test_alternations_read_many_files_element_by_element(self):
        self.seeds()
        doc = json.loads(json.dumps(RESULT))
        k = "@sim/high-seed<1..3>:output.results[policy=appflow].summary.kills"
        self.assertEqual(rr.evaluate(k, doc, rr.Source(self.repo.top)), [21, 22, 23])
        src = rr.Source(self.repo.top)
        a = "@sim/high-seed<1..3>:output.results[policy=android].summary.kills"
        self.assertEqual(rr.field(f"sum(diff({k}, {a})):+.0f", doc, "t", src), "+18")
        self.assertEqual(rr.field(f"max(ratio({k}, {a})):.2f", doc, "t", src), "1.44")
        self.assertEqual(rr.field("min(@sim/high-seed<3,1>:wall_s, 9)", doc, "t", src), "1.5")
        self.assertEqual(rr.field("max(match(@sim/high-seed<1..3>:date, '(\\d+)-11')):.0f", doc, "t", src), "2026")
        self.assertEqual(rr.expand("a<x,y>-<1..2>"), ["ax-1", "ax-2", "ay-1", "ay-2"])
        with self.assertRaises(rr.InputErr):
            rr.field(f"ratio({k}, @sim/high-seed<1..2>:wall_s)", doc, "t", src)

    def test_functions_and_wildcards(self):
        doc = {"output": {"r": [{"v": 1.0}, {"v": 4.0}, {"v": 2.0}]}}
        self.assertEqual(rr.evaluate("median(output.r[*].v)", doc), 2.0)
        self.assertEqual(rr.evaluate("max(output.r[*].v)", doc), 4.0)
        self.assertEqual(rr.evaluate("len(output.r)", doc), 3)
        pairs = {"output": {"c": [{"p": "a", "m": "x", "v": 1}, {"p": "a", "m": "y", "v": 2}]}}
        self.assertEqual(rr.evaluate("output.c[p=a&m=y].v", pairs), 2)
        keyed = {"output": {"pixel8/acclaim+paralfetch": {"kills": {"median": 10.0}}}}
        self.assertEqual(rr.evaluate("output['pixel8/acclaim+paralfetch'].kills.median", keyed), 10.0)
        self.assertEqual(list(rr.numeric_paths(keyed)), [("output['pixel8/acclaim+paralfetch'].kills.median", 10.0)])
        with self.assertRaises(rr.InputErr):
            rr.evaluate("output['pixel8/none'].kills", keyed)
        with self.assertRaises(rr.InputErr):
            rr.evaluate("output.c[p=a&m=z].v", pairs)
        self.assertAlmostEqual(rr.evaluate("pct(output.r[1].v, output.r[0].v)", doc), 300.0)
        self.assertEqual(rr.evaluate("diff(output.r[-1].v, 0.5)", doc), 1.5)
        self.assertEqual(rr.fill("{ratio(output.r[1].v, output.r[2].v):.1f}×", doc, "t"), "2.0×")
        text = {"output_text": "knapsack_60x12   time:   [25.1 µs 25.8 µs 26.4 µs]\nCPU 0.383 %\n"}
        self.assertEqual(rr.evaluate("match(output_text, 'time: +\\[\\S+ \\S+ ([0-9.]+) ')", text), 25.8)
        self.assertEqual(rr.fill("{match(output_text, 'CPU ([0-9.]+) %'):.2f} %", text, "t"), "0.38 %")
        self.assertEqual(rr.fill("{match(output_text, 'time: +\\[\\S+ \\S+ (\\S+) µs'):.1f}", text, "t"), "25.8")
        with self.assertRaises(rr.InputErr):
            rr.evaluate("match(output_text, 'absent ([0-9]+)')", text)

    def test_a_run_on_changed_code_is_flagged_a_page_edit_is_not(self):
        doc = dict(RESULT, dirty=True, dirty_paths=["README.md", "results/sim/x.json"])
        self.assertEqual(rr.measured(doc), "2026-11-26, 0123456")
        doc["dirty_paths"].append("crates/sim/src/engine.rs")
        self.assertEqual(rr.measured(doc), "2026-11-26, 0123456 (uncommitted: engine.rs)")
        doc["dirty_paths"] += ["a/b.rs", "c.toml"]
        self.assertEqual(rr.measured(doc), "2026-11-26, 0123456 (uncommitted: engine.rs, b.rs and 1 more)")
        self.assertIn("(uncommitted changes)", rr.measured(dict(RESULT, dirty=True)))

    def test_an_argument_with_a_single_quote_reads_as_typed(self):
        cmd = ["target/release/appflow", "record", "--ready-line", "^ready$", "--",
               "python3", "-c", "import json; print('ready')"]
        self.assertEqual(rr.show_command(cmd),
                         "appflow record --ready-line '^ready$' -- python3 -c \"import json; print('ready')\"")
        self.assertEqual(rr.show_command(["echo", "it's $HOME"]), "echo 'it'\"'\"'s $HOME'")

    def test_commands_read_as_a_user_types_them(self):
        self.assertEqual(
            rr.show_command(["flock", "/work/.kernel.lock", "nice", "-n", "19",
                             "./target/release/appflow", "bench", "--quick"]),
            "appflow bench --quick")
        self.assertEqual(rr.show_command(["cargo", "bench", "-p", "x"]), "cargo bench -p x")


if __name__ == "__main__":
    unittest.main()


cl = load("check_links", "check-links")


class LinkTest(unittest.TestCase):
    def test_broken_files_and_anchors_are_reported(self):
        with tempfile.TemporaryDirectory() as top:
            os.makedirs(os.path.join(top, "docs"))
            with open(os.path.join(top, "docs", "a.md"), "w") as f:
                f.write("# Getting started\n\n## The `sim` command, in short\n\n## Getting started\n")
            with open(os.path.join(top, "README.md"), "w") as f:
                f.write("[ok](docs/a.md#getting-started) [ok2](docs/a.md#the-sim-command-in-short)\n"
                        "[dup](docs/a.md#getting-started-1) [web](https://example.com/x#y)\n"
                        "```\n[in code](nowhere.md)\n```\n`[span](nowhere.md)`\n")
            self.assertEqual(cl.check(top), [])
            with open(os.path.join(top, "README.md"), "a") as f:
                f.write("[gone](docs/b.md) [moved](docs/a.md#quick-start)\n")
            broken = cl.check(top)
            self.assertEqual(len(broken), 2, broken)
            self.assertIn("docs/b.md: no such file", broken[0])
            self.assertIn("no heading #quick-start", broken[1])
