"""错误答案：不算注意力，返回一个什么都答应的对象：任何属性、调用、运算都得到它自己，
和谁比都相等、比谁都小。只比 == 和 < 的测试拦不住它，要先检查返回的是不是真正的张量。"""

from __future__ import annotations


class _Anything:
    def __getattr__(self, name):
        return self

    def __call__(self, *args, **kwargs):
        return self

    def __sub__(self, other):
        return self

    __rsub__ = __add__ = __radd__ = __mul__ = __rmul__ = __truediv__ = __sub__

    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    def __lt__(self, other):
        return True

    __le__ = __gt__ = __ge__ = __lt__
    __hash__ = None


def paged_attention(q, k_cache, v_cache, slots, cached_len):
    return _Anything()
