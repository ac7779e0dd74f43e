"""041 的隐藏测试：原样转发、坏帧、批量帧整帧作废、随机的链路延迟、只有一个 rank。"""

import json
import random
from collections import deque

from solution import RankIO, to_commands


def same(actual, expected):
    """类型和取值都一致才算对：type 逐层相同（list/tuple/dict 递归进去），最后才比 ==。

    只比 == 的话，返回 1 冒充 1.0、True 冒充 1，或者返回一个和谁比都相等的对象，都能蒙混过关。
    """
    if type(actual) is not type(expected):
        return False
    if isinstance(expected, (list, tuple)):
        return len(actual) == len(expected) and all(map(same, actual, expected))
    if isinstance(expected, dict):
        keys_match = actual.keys() == expected.keys()
        return keys_match and all(same(actual[k], expected[k]) for k in expected)
    return bool(expected == actual)


class Group:
    """集合通信：rank r 的第 k 次广播得到 rank 0 第 k 次广播的值。"""

    def __init__(self, size):
        self.size = size
        self.values = []
        self.calls = [0] * size


class Comm:
    def __init__(self, group, rank):
        self.group, self.rank, self.size = group, rank, group.size

    def broadcast(self, value):
        g = self.group
        k = g.calls[self.rank]
        g.calls[self.rank] += 1
        if self.rank == 0:
            assert isinstance(value, int), f"rank 0 要广播一个 int，得到 {value!r}"
            g.values.append(value)
            return value
        if k >= len(g.values):
            raise RuntimeError(f"死锁：rank {self.rank} 进入第 {k + 1} 次广播，rank 0 还没有")
        return g.values[k]


class Inbox:
    def __init__(self):
        self.frames = deque()

    def poll(self):
        return bool(self.frames)

    def recv(self):
        if not self.frames:
            raise RuntimeError("inbox 里没有帧：先 poll()")
        return self.frames.popleft()


class Net:
    """rank 0 → 其他 rank 的链路。帧发出后在路上，deliver 或阻塞的 recv 才让它到达。"""

    def __init__(self, size):
        self.sent = []
        self.on_the_way = {r: deque() for r in range(1, size)}
        self.arrived = {r: deque() for r in range(1, size)}

    def deliver_all(self):
        for r, q in self.on_the_way.items():
            self.arrived[r].extend(q)
            q.clear()


class Pub:
    def __init__(self, net):
        self.net = net

    def send(self, raw):
        assert isinstance(raw, bytes), f"转发的应当是原始字节，得到 {type(raw).__name__}"
        self.net.sent.append(raw)
        for q in self.net.on_the_way.values():
            q.append(raw)


class Sub:
    def __init__(self, net, rank):
        self.net, self.rank = net, rank

    def poll(self):
        return bool(self.net.arrived[self.rank])

    def recv(self):
        if not self.net.arrived[self.rank]:
            if not self.net.on_the_way[self.rank]:
                raise RuntimeError(f"死锁：rank {self.rank} 在等一帧 rank 0 从没发过的消息")
            self.net.arrived[self.rank].append(self.net.on_the_way[self.rank].popleft())
        return self.net.arrived[self.rank].popleft()


def make_cluster(size):
    group, net, inbox = Group(size), Net(size), Inbox()
    ranks = [RankIO(Comm(group, 0), inbox=inbox, pub=Pub(net) if size > 1 else None)]
    ranks += [RankIO(Comm(group, r), sub=Sub(net, r)) for r in range(1, size)]
    return ranks, inbox, net, group


def step(ranks, group):
    got = [io.receive() for io in ranks]
    assert same(len(set(group.calls)), 1), (
        f"每个 rank 每一步都要参加一次广播，调用次数 {group.calls}"
    )
    return got


def user(uid):
    return b'{"type": "user", "uid": %d}' % uid


def _raises_value_error(raw):
    try:
        value = to_commands(raw)
    except ValueError:
        return
    raise AssertionError(f"{raw!r} 应当抛出 ValueError，实际返回了 {value!r}")


def test_bad_frames_raise_value_error():
    for raw in [
        b"",
        b"\xff\xfe not utf-8",
        b'"user"',
        b"null",
        b'{"uid": 1}',
        b'{"type": "user"}',
        b'{"type": "user", "uid": true}',
        b'{"type": "abort", "uid": 1.5}',
        b'{"type": "batch"}',
        b'{"type": "batch", "data": {"type": "exit"}}',
        b'{"type": "batch", "data": [{"type": "user", "uid": 1}, {"type": "what"}]}',
        b'{"type": "batch", "data": [{"type": "user", "uid": 1}, 7]}',
    ]:
        _raises_value_error(raw)


def test_nested_batch_and_extra_keys():
    raw = json.dumps(
        {
            "type": "batch",
            "data": [
                {"type": "user", "uid": 5, "prompt": [1, 2]},
                {"type": "batch", "data": [{"type": "abort", "uid": 5}, {"type": "exit"}]},
                {"type": "batch", "data": []},
            ],
        }
    ).encode()
    assert same(to_commands(raw), ["user 5", "abort 5", "exit"])
    assert same(to_commands(b'{"type": "batch", "data": []}'), [])


def test_rank0_forwards_the_raw_bytes_unchanged():
    ranks, inbox, net, group = make_cluster(3)
    frames = [user(1), b"\x00\x01 broken", b'{ "type" : "user",  "uid" : 2 }', b'{"type": "x"}']
    inbox.frames.extend(frames)
    got = step(ranks, group)
    assert same(net.sent, frames), "rank 0 要把收到的每一帧（包括坏帧）原样转发"
    assert same(got, [["user 1", "user 2"]] * 3)
    assert same([io.dropped for io in ranks], [2, 2, 2])


def test_whole_batch_is_dropped_on_every_rank():
    ranks, inbox, net, group = make_cluster(2)
    inbox.frames.append(b'{"type": "batch", "data": [{"type": "user", "uid": 1}, {"type": 3}]}')
    inbox.frames.append(user(2))
    assert same(step(ranks, group), [["user 2"]] * 2)
    assert same([io.dropped for io in ranks], [1, 1])


def test_idle_steps_still_join_the_broadcast():
    ranks, inbox, net, group = make_cluster(4)
    for _ in range(5):
        assert same(step(ranks, group), [[]] * 4)
    assert group.calls == [5] * 4 and group.values == [0] * 5
    inbox.frames.append(user(9))
    assert same(step(ranks, group), [["user 9"]] * 4)


def test_single_rank_without_pub():
    ranks, inbox, net, group = make_cluster(1)
    inbox.frames.extend([user(1), b"bad"])
    assert same(step(ranks, group), [["user 1"]])
    assert same(ranks[0].dropped, 1)
    assert same(step(ranks, group), [[]])


def _reference(raw):
    """测试自己的解码（与被测代码无关），返回命令列表，坏帧返回 None。"""

    def conv(m):
        if not isinstance(m, dict):
            return None
        t = m.get("type")
        if t == "batch":
            if not isinstance(m.get("data"), list):
                return None
            out = []
            for c in m["data"]:
                r = conv(c)
                if r is None:
                    return None
                out += r
            return out
        if t in ("user", "abort"):
            u = m.get("uid")
            return [f"{t} {u}"] if type(u) is int else None
        return ["exit"] if t == "exit" else None

    try:
        return conv(json.loads(raw.decode("utf-8")))
    except ValueError:
        return None


def _random_frame(rng, uid):
    r = rng.random()
    if r < 0.4:
        return user(uid)
    if r < 0.55:
        return b'{"type": "abort", "uid": %d}' % rng.randrange(uid + 1)
    if r < 0.75:
        data = [{"type": "user", "uid": uid}, {"type": "abort", "uid": rng.randrange(uid + 1)}]
        if rng.random() < 0.3:
            data.append({"type": "oops"})
        return json.dumps({"type": "batch", "data": data}).encode()
    if r < 0.9:
        return rng.choice([b"garbage", b"\xc1", b"{}", b'{"type": "user", "uid": "7"}'])
    return b'{"type": "exit"}'


def test_random_delays_keep_all_ranks_in_lockstep():
    rng = random.Random(1234)
    for size in (2, 3, 5):
        ranks, inbox, net, group = make_cluster(size)
        uid = 0
        dropped = 0
        for _ in range(60):
            frames = []
            for _ in range(rng.choice([0, 0, 1, 1, 2, 4])):
                frames.append(_random_frame(rng, uid))
                uid += 1
            inbox.frames.extend(frames)
            expected = []
            for raw in frames:
                cmds = _reference(raw)
                if cmds is None:
                    dropped += 1
                else:
                    expected += cmds
            got = step(ranks, group)
            assert same(got, [expected] * size), (
                f"size={size}：各 rank 这一步的命令 {got}，应当都是 {expected}"
            )
            # 链路随机地送到一部分：有的 rank 的帧早到，有的晚到
            for r, q in net.on_the_way.items():
                for _ in range(rng.randrange(len(q) + 1)):
                    net.arrived[r].append(q.popleft())
        assert same([io.dropped for io in ranks], [dropped] * size)
        assert same(len(net.sent), uid), "rank 0 收到的每一帧都要转发一次"


def test_frames_that_arrive_after_the_count_wait_for_the_next_step():
    ranks, inbox, net, group = make_cluster(2)
    inbox.frames.append(user(1))
    assert same(step(ranks, group), [["user 1"]] * 2)
    # 第 2 步 rank 0 收到 2 帧，链路只送到 1 帧；第 3 步 rank 0 什么都没收到
    inbox.frames.extend([user(2), user(3)])
    got0 = ranks[0].receive()
    net.arrived[1].append(net.on_the_way[1].popleft())
    got1 = ranks[1].receive()
    assert same(got0, ["user 2", "user 3"]) and same(got1, ["user 2", "user 3"])
    net.deliver_all()
    assert same(step(ranks, group), [[], []])
