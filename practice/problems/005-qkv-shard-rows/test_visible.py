"""005 的可见测试。"""

from solution import qkv_pieces


def _error_message(*args):
    """调用 qkv_pieces，要求它抛 ValueError，返回错误信息。"""
    try:
        value = qkv_pieces(*args)
    except ValueError as exc:
        return str(exc)
    raise AssertionError(f"qkv_pieces{args} 应当抛出 ValueError，实际返回了 {value!r}")


def test_single_rank_takes_everything():
    assert qkv_pieces(16, 8, 128, 1, 0) == [("q", 0, 2048), ("k", 0, 1024), ("v", 0, 1024)]


def test_even_split():
    assert qkv_pieces(16, 8, 128, 2, 1) == [("q", 1024, 2048), ("k", 512, 1024), ("v", 512, 1024)]
    assert qkv_pieces(16, 8, 128, 8, 3) == [("q", 768, 1024), ("k", 384, 512), ("v", 384, 512)]


def test_replicated_kv_head():
    assert qkv_pieces(16, 8, 128, 16, 5) == [("q", 640, 768), ("k", 256, 384), ("v", 256, 384)]
    assert qkv_pieces(16, 8, 128, 16, 4) == [("q", 512, 640), ("k", 256, 384), ("v", 256, 384)]


def test_q_heads_must_split_evenly():
    message = _error_message(16, 8, 128, 3, 0)
    assert "16" in message and "3" in message, message
