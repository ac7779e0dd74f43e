"""045 的可见测试：题面里的示例。"""

from solution import Proc, shutdown


def test_example():
    procs = [
        Proc("TP0", "scheduler", on_exit_msg=1.5, socket_file="/tmp/m0"),
        Proc("detok", "tokenizer", on_sigterm=0.25, socket_file="/tmp/m1"),
    ]
    assert shutdown(procs, ["/tmp/m0", "/tmp/m1", "/tmp/m3"]) == [
        (0.0, "send", "ExitMsg"),
        (1.5, "close", "exit sender"),
        (1.5, "terminate", "detok"),
        (1.75, "unlink", "/tmp/m3"),
    ]
