"""046 的可见测试：题面里的示例。"""

from solution import expected_acks, process_names, wait_until_ready


def test_counts_and_names():
    assert expected_acks(2, 0) == 2
    assert process_names(2, 1) == ["scheduler-0", "scheduler-1", "detokenizer", "tokenizer-0"]


def test_examples():
    ok = [(3.0, "detokenizer", "ack"), (9.5, "scheduler-0", "ack")]
    assert wait_until_ready(ok, tp=2, num_tokenizer=0) == ("ready", 9.5)
    crash = [(3.0, "detokenizer", "ack"), (7.0, "scheduler-1", "exit")]
    assert wait_until_ready(crash, tp=2, num_tokenizer=0) == ("failed: scheduler-1", 7.0)
    assert wait_until_ready(crash[:1], tp=2, num_tokenizer=0) == ("hang", 3.0)
    assert wait_until_ready(crash[:1], 2, 0, timeout=60.0) == ("timeout", 60.0)
