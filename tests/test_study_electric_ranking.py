"""The Electric ranking's arithmetic (studies/electric/ranking.py), by hand, without a model."""
import pytest

from studies.electric.ranking import fractions_from_results, print_row


def scored(score, tokens=("a", "b")):
    return {"score": score, "tokens": list(tokens), "energies": [-score / 2] * len(tokens)}


def test_fractions_and_margins_by_hand():
    # Two originals, then their swapped, shuffled and (for the second only) replaced copies.
    scores = [-1.0, -2.0] + [-1.5, -1.0] + [-4.0, -2.5] + [-3.0]
    row = fractions_from_results([scored(s) for s in scores], count=2, kept=[1], where="by hand")
    assert row["swap"] == 0.5 and row["shuffle"] == 1.0 and row["replace"] == 1.0 and row["replace_pairs"] == 1
    assert row["swap_margin"] == pytest.approx(((-1.0 + 1.5) + (-2.0 + 1.0)) / 2)  # -0.25: the copies win on average
    assert row["shuffle_margin"] == pytest.approx(((-1.0 + 4.0) + (-2.0 + 2.5)) / 2)


def test_non_finite_scores_name_where():
    with pytest.raises(FloatingPointError, match="ckpt-7"):
        fractions_from_results([scored(float("nan"))] * 3, count=1, kept=[], where="ckpt-7")


def test_a_row_scored_before_a_measurement_existed_prints_n_a(capsys):
    print_row(1000, {"swap": 0.5, "shuffle": 0.48, "replace": 0.9, "replace_pairs": 180, "within_token": 0.1,
                     "between_tokens": 1.2, "seconds": 12.0})
    cells = [cell.strip() for cell in capsys.readouterr().out.split("|")[1:-1]]
    assert cells == ["1000", "0.500", "0.480", "0.900", "180", "n/a", "n/a", "n/a", "0.100", "1.200"] + ["n/a"] * 4 + ["12"]


def test_the_reference_run_is_refused_on_the_accelerator(capsys):
    from studies.electric.cli import parse_args

    with pytest.raises(SystemExit) as stopped:
        parse_args(["--work-dir", "runs/x", "--reference-electra", "--device-export", "runs/y"])
    assert stopped.value.code == 2 and "--reference-electra runs here only" in capsys.readouterr().err


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # runpy: a module run again after its package imported it
def test_the_old_command_names_the_new_one(capsys):
    """`python -m studies.electric.ranking` (the command before cli.py) exits 2 naming the one to type."""
    import runpy

    with pytest.raises(SystemExit) as stopped:
        runpy.run_module("studies.electric.ranking", run_name="__main__")
    assert stopped.value.code == 2
    assert capsys.readouterr().err.strip().endswith("the command is now python -m studies.electric (same flags)")
