"""bench/suite_cost.py on a two-test file of its own: the CPU a test burns in the pytest process and the CPU of a
process it starts are told apart and charged to that file (the whole suite's run is the tool's use, not a test)."""
import re
import textwrap

from bench import suite_cost

BURNS = textwrap.dedent('''
    import subprocess, sys, time

    def burn(seconds):
        end = time.process_time() + seconds
        while time.process_time() < end:
            pass

    def test_in_the_worker():
        burn(0.4)

    def test_in_a_child():
        subprocess.run([sys.executable, "-c", "import time\\nend = time.process_time() + 0.6\\n"
                        "while time.process_time() < end: pass"], check=True)
''')


def test_a_files_own_and_child_cpu_are_told_apart(tmp_path, monkeypatch, capsys):
    (tmp_path / "test_burns.py").write_text(BURNS, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    log = tmp_path / "tests.jsonl"
    status = suite_cost.main([f"--pytest-args=--rootdir={tmp_path}", "--log", str(log), "test_burns.py"])
    printed = capsys.readouterr().out
    assert status == 0, printed
    records = {r["test"].split("::")[1]: r for r in suite_cost.read_records(log)}
    assert set(records) == {"test_in_the_worker", "test_in_a_child"}
    assert records["test_in_the_worker"]["own_cpu"] >= 0.35 and records["test_in_the_worker"]["child_cpu"] < 0.05
    assert records["test_in_a_child"]["child_cpu"] >= 0.55 and records["test_in_a_child"]["own_cpu"] < 0.3
    assert re.search(r"^CPU: .+; \d+ cores; load average before the run: [\d.]+$", printed, re.M), printed
    row = re.search(r"^test_burns\.py +2 +([\d.]+) +([\d.]+) +([\d.]+) +([\d.]+)$", printed, re.M)
    assert row, printed
    wall, own, child, total = map(float, row.groups())
    assert own >= 0.35 and child >= 0.55 and abs(total - own - child) < 0.15 and wall >= 0.9
    assert "2 tests in 1 files" in printed and "in child processes (" in printed


def test_the_table_orders_files_by_their_cpu():
    records = [{"file": "a.py", "test": "a.py::x", "wall": 1.0, "own_cpu": 1.0, "child_cpu": 0.0},
               {"file": "b.py", "test": "b.py::y", "wall": 1.0, "own_cpu": 0.5, "child_cpu": 2.0},
               {"file": "a.py", "test": "a.py::z", "wall": 1.0, "own_cpu": 0.2, "child_cpu": 0.0}]
    lines = suite_cost.table(records, run_wall=3.0, top=1).splitlines()
    assert lines[1].split()[:2] == ["b.py", "1"] and len(lines) == 4  # header, the top file, two total lines
    assert "CPU in tests: 3.7 s = 1.7 s in the pytest worker(s) + 2.0 s in child processes (54%)" in lines[3]
