"""bench.dense_grad_cpu runs and prints both oneDNN settings (tiny shapes; no timing is asserted)."""
from bench import dense_grad_cpu


def test_prints_every_product_for_oneDNN_on_and_off(capsys):
    results = dense_grad_cpu.main(["--rows", "8", "--in-size", "4", "--out-size", "6", "--repeats", "2",
                                   "--threads", "1"])
    assert set(results) == {True, False}
    for times in results.values():
        assert set(times) == set(dense_grad_cpu.PRODUCTS) and all(ms > 0 for ms in times.values())
    out = capsys.readouterr().out
    assert "oneDNN on :" in out and "oneDNN off:" in out and "weight gradient, oneDNN on / off:" in out
