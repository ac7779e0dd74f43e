"""Radix 树前缀缓存：相同开头的请求共用同一段 KV，只算一次。

树上每个节点存一段 token（长度是 ``page_size`` 的整数倍）和这段 token 的 KV 所在的页；
从根走到某个节点，经过的 token 连起来就是一个被缓存的前缀::

    根 ─ [系统提示 32 个 token] ─┬─ [用户 A 的问题 8 个] ─ [回答 16 个]
                                 └─ [用户 B 的问题 12 个]

- ``match_prefix``：沿树往下走，找最长的已缓存前缀；匹配停在节点中间时把节点一分为二；
- ``insert_prefix``：把一段新算好的前缀挂到树上，已有的部分不动；
- ``lock`` / ``unlock``：从节点到根一路加减引用计数，计数大于 0 的节点不能被淘汰；
- ``evict``：空闲页不够时，按最久没用过的顺序淘汰没加锁的叶子（叶子没了，父节点可能变成叶子）。
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Sequence

from .base import BasePrefixCache, CacheHandle

__all__ = ["RadixNode", "RadixPrefixCache"]


class RadixNode:
    """树上的一个节点。孩子按"第一页的 token"索引：同一个父节点下，两个孩子的第一页一定不同
    （否则它们有公共前缀，应该先合成一个节点）。"""

    def __init__(
        self, key: list[int], pages: list[int], parent: RadixNode | None, tick: int
    ) -> None:
        self.key = key
        self.pages = pages
        self.parent = parent
        self.children: dict[tuple[int, ...], RadixNode] = {}
        self.ref_count = 0
        self.last_access = tick

    @property
    def is_leaf(self) -> bool:
        return not self.children

    def __repr__(self) -> str:
        return f"RadixNode(len={len(self.key)}, pages={self.pages}, ref={self.ref_count})"


class RadixPrefixCache(BasePrefixCache):
    def __init__(self, page_size: int) -> None:
        self.page_size = page_size
        self._clock = itertools.count(1)  # 逻辑时钟：比 time.monotonic() 好测，也不会有两个相同的值
        self.root = RadixNode([], [], None, 0)
        self.root.ref_count = 1  # 根永远不被淘汰
        self._evictable = 0  # 没加锁的节点上的页数
        self._protected = 0  # 加了锁的节点上的页数

    # ------------------------------------------------------------ 查找与插入

    def _first_page(self, ids: Sequence[int], pos: int) -> tuple[int, ...]:
        return tuple(ids[pos : pos + self.page_size])

    def _common_len(self, key: list[int], ids: Sequence[int], pos: int) -> int:
        """``key`` 和 ``ids[pos:]`` 的公共前缀长度，按整页算（半页相同不算）。

        先整段比一次：最常见的是整段相同，列表的 ``==`` 在 C 里就比完了，几千个 token 的提示
        也不用在 Python 里一页一页地走；不同时才逐个找第一处不同。
        """
        n = min(len(key), len(ids) - pos)
        other = list(ids[pos : pos + n])
        if key[:n] != other:
            n = next(i for i, (a, b) in enumerate(zip(key, other)) if a != b)
        return n - n % self.page_size

    def _split(self, node: RadixNode, at: int) -> RadixNode:
        """把 ``node`` 在第 ``at`` 个 token 处切开，返回新的上半段。经过 ``node`` 的锁也都经过
        上半段，所以上半段的引用计数和 ``node`` 相同；页数的账目不变。"""
        assert node.parent is not None and 0 < at < len(node.key) and at % self.page_size == 0
        upper = RadixNode(node.key[:at], node.pages[: at // self.page_size], node.parent, 0)
        upper.ref_count, upper.last_access = node.ref_count, node.last_access
        node.parent.children[self._first_page(upper.key, 0)] = upper
        node.key, node.pages = node.key[at:], node.pages[at // self.page_size :]
        node.parent = upper
        upper.children[self._first_page(node.key, 0)] = node
        return upper

    def _walk(self, ids: Sequence[int], tick: int) -> tuple[RadixNode, int, list[int]]:
        """从根往下走到最长的匹配；停在节点中间就切开。返回最后一个节点、匹配长度和页号。"""
        node, pos, pages = self.root, 0, []
        usable = len(ids) - len(ids) % self.page_size
        while pos < usable:
            child = node.children.get(self._first_page(ids, pos))
            if child is None:
                break
            n = self._common_len(child.key, ids, pos)
            if n < len(child.key):
                child = self._split(child, n)
            child.last_access = tick
            node, pos = child, pos + n
            pages += child.pages
        return node, pos, pages

    def match_prefix(self, input_ids: Sequence[int]) -> tuple[CacheHandle, list[int]]:
        node, length, pages = self._walk(input_ids, next(self._clock))
        return CacheHandle(length, node), pages

    def insert_prefix(self, input_ids: Sequence[int], pages: Sequence[int]) -> None:
        if len(input_ids) % self.page_size or len(pages) * self.page_size != len(input_ids):
            raise ValueError(
                f"insert needs whole pages: {len(input_ids)} tokens, {len(pages)} pages "
                f"of {self.page_size}"
            )
        tick = next(self._clock)
        node, pos, _ = self._walk(input_ids, tick)
        if pos < len(input_ids):  # 没缓存过的尾巴挂成一个新叶子，它的页从此归缓存
            rest = list(pages[pos // self.page_size :])
            leaf = RadixNode(list(input_ids[pos:]), rest, node, tick)
            node.children[self._first_page(leaf.key, 0)] = leaf
            self._evictable += len(leaf.pages)

    # ------------------------------------------------------------ 加锁

    def _path(self, handle: CacheHandle) -> list[RadixNode]:
        node = handle.node
        if node is None:
            return []
        assert isinstance(node, RadixNode)
        path = []
        while node is not self.root:
            path.append(node)
            node = node.parent
            if node is None:  # 句柄指向的节点已经被淘汰：调用方在解锁之后还拿着旧句柄
                raise RuntimeError("the handle's node is no longer in the tree (stale handle?)")
        return path

    def lock(self, handle: CacheHandle) -> None:
        for node in self._path(handle):
            if node.ref_count == 0:
                self._evictable -= len(node.pages)
                self._protected += len(node.pages)
            node.ref_count += 1

    def unlock(self, handle: CacheHandle) -> None:
        for node in self._path(handle):
            if node.ref_count <= 0:
                raise RuntimeError(f"unlock of an unlocked node {node} (double unlock?)")
            node.ref_count -= 1
            if node.ref_count == 0:
                self._evictable += len(node.pages)
                self._protected -= len(node.pages)

    # ------------------------------------------------------------ 淘汰

    def evict(self, num_pages: int) -> list[int]:
        """按最久没用过的顺序淘汰没加锁的叶子，直到凑够 ``num_pages`` 页（或者没有可淘汰的了）。"""
        heap = [(n.last_access, id(n), n) for n in self._nodes() if n.is_leaf and n.ref_count == 0]
        heapq.heapify(heap)
        freed: list[int] = []
        while heap and len(freed) < num_pages:
            _, _, leaf = heapq.heappop(heap)
            parent = leaf.parent
            assert parent is not None
            del parent.children[self._first_page(leaf.key, 0)]
            leaf.parent = None
            freed += leaf.pages
            self._evictable -= len(leaf.pages)
            if parent is not self.root and parent.is_leaf and parent.ref_count == 0:
                heapq.heappush(heap, (parent.last_access, id(parent), parent))
        return freed

    # ------------------------------------------------------------ 账目

    @property
    def size_info(self) -> tuple[int, int]:
        return self._evictable, self._protected

    def _nodes(self) -> list[RadixNode]:
        out, stack = [], list(self.root.children.values())
        while stack:
            node = stack.pop()
            out.append(node)
            stack.extend(node.children.values())
        return out

    def cached_pages(self) -> list[int]:
        return [p for n in self._nodes() for p in n.pages]

    def check_integrity(self) -> None:
        """真的去检查（官方的这个函数是空的，mini-sglang #149）：

        - 每个节点非空、长度是整页、页数对得上；孩子的索引就是它第一页的 token，父指针指回来；
        - 父节点的引用计数不小于孩子们的之和（每把锁都从某个节点一路加到根）；
        - 加锁与没加锁节点上的页数，和两个计数器一致；同一页不会出现在两个节点上。
        """
        evictable = protected = 0
        seen: set[int] = set()
        for node in [self.root, *self._nodes()]:
            if node is not self.root:
                if not node.key or len(node.key) != len(node.pages) * self.page_size:
                    raise RuntimeError(f"bad node {node}: {len(node.key)} tokens")
                if node.ref_count < 0:
                    raise RuntimeError(f"negative ref count on {node}")
                if node.ref_count:
                    protected += len(node.pages)
                else:
                    evictable += len(node.pages)
            for key, child in node.children.items():
                if child.parent is not node or key != self._first_page(child.key, 0):
                    raise RuntimeError(f"child {child} is linked wrongly under {node}")
            child_refs = sum(c.ref_count for c in node.children.values())
            if node is not self.root and node.ref_count < child_refs:
                raise RuntimeError(f"{node} has ref {node.ref_count} < children's {child_refs}")
            if seen.intersection(node.pages):
                raise RuntimeError(f"pages {sorted(seen & set(node.pages))} are in two nodes")
            seen.update(node.pages)
        if (evictable, protected) != (self._evictable, self._protected):
            raise RuntimeError(
                f"size counters {(self._evictable, self._protected)} != "
                f"actual {(evictable, protected)}"
            )
