"""056 的可见测试：题面里的示例。"""

from solution import percentile, request_metrics


def close(a, b):
    return abs(a - b) <= 1e-12 * max(1.0, abs(b))


def test_median_of_four_unsorted():
    assert close(percentile([3.0, 1.0, 2.0, 4.0], 50), 2.5)


def test_ends_and_single_value():
    assert percentile([3.0, 1.0, 2.0, 4.0], 100) == 4.0
    assert percentile([3.0, 1.0, 2.0, 4.0], 0) == 1.0
    assert percentile([7.0], 99) == 7.0


def test_interpolates_between_two():
    assert close(percentile([10.0, 20.0], 99), 19.9)


def test_request_metrics_example():
    ttft, tpot, latency = request_metrics(0.0, [0.05, 0.06, 0.07, 0.08], 4)
    assert close(ttft, 0.05) and close(tpot, 0.01) and close(latency, 0.08)
