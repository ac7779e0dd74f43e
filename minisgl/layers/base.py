"""``BaseOP``：不继承 ``nn.Module`` 的"层"。

推理引擎用不到 ``nn.Module`` 的大部分功能：没有反向传播、没有 ``train()/eval()``、没有 hook，
参数也不需要包成 ``nn.Parameter``。我们只要两件事：

1. 层是普通的 Python 对象，权重就是挂在属性上的 ``torch.Tensor``；
2. 能按带点的名字（``model.layers.0.mlp.down_proj.weight``）列出和加载全部权重，
   名字与第 2 章的加载器产出的名字一一对应。

规则只有三条：属性是张量 → 它是一个权重；属性是 ``BaseOP`` → 递归进去，名字加一段前缀；
名字以下划线开头的属性（缓存、通信器、配置）不算状态，加载时不碰它们。

加载是**严格**的：缺了的、多出来的、形状或 dtype 不对的，全部检查完一次性报出来；
只要有一处不对，就一个权重也不替换——不会留下一个加载了一半的模型。
"""

from __future__ import annotations

from typing import Any, Generic, Iterator, Mapping, TypeVar

import torch

__all__ = ["BaseOP", "OPList", "StateDictError"]


class StateDictError(RuntimeError):
    """``load_state_dict`` 发现权重对不上。消息里列出全部问题，每条一行。"""


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


class BaseOP:
    """所有层的基类。子类在 ``__init__`` 里把权重建成属性，再实现 ``forward``。"""

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__}.forward")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward(*args, **kwargs)

    # ------------------------------------------------------------ 遍历权重

    def _children(self) -> Iterator[tuple[str, torch.Tensor | BaseOP]]:
        """本层直接持有的 (名字, 张量或子层)。``OPList`` 覆盖它，用下标当名字。"""
        for name, value in vars(self).items():
            if name.startswith("_"):
                continue
            if isinstance(value, (torch.Tensor, BaseOP)):
                yield name, value
            elif isinstance(value, (list, tuple, dict)) and any(
                isinstance(v, (torch.Tensor, BaseOP))
                for v in (value.values() if isinstance(value, dict) else value)
            ):
                # 放在普通 list 里的层不会被遍历到，它们的权重会悄悄地一直是空的
                raise TypeError(
                    f"{type(self).__name__}.{name} is a {type(value).__name__} holding layers or "
                    f"tensors; wrap layers in OPList, or name the attribute with a leading '_'"
                )

    def named_tensors(self, prefix: str = "") -> Iterator[tuple[str, BaseOP, str, torch.Tensor]]:
        """深度优先地产出 ``(全名, 持有它的层, 属性名, 张量)``。"""
        for name, value in self._children():
            full = _join(prefix, name)
            if isinstance(value, BaseOP):
                yield from value.named_tensors(full)
            else:
                yield full, self, name, value

    def state_dict(self, prefix: str = "") -> dict[str, torch.Tensor]:
        """``{带点的全名: 张量}``。返回的是张量本身（不拷贝）。"""
        return {full: t for full, _, _, t in self.named_tensors(prefix)}

    # ------------------------------------------------------------ 严格加载

    def load_state_dict(self, state_dict: Mapping[str, torch.Tensor], prefix: str = "") -> None:
        """用 ``state_dict`` 里的张量**替换**本层（及子层）的权重。

        替换而不是 ``copy_``：第 5 章在 meta 设备上建模型，那些占位张量没有存储，只能整个换掉。
        所以只检查形状和 dtype，不检查设备——新张量在哪个设备上，权重就在哪个设备上。
        ``state_dict`` 本身不会被修改。
        """
        slots = list(self.named_tensors(prefix))
        expected = {full for full, _, _, _ in slots}
        problems: list[str] = []
        missing = [full for full, _, _, _ in slots if full not in state_dict]
        unexpected = sorted(k for k in state_dict if k not in expected)
        if missing:
            problems.append(f"missing keys: {', '.join(missing)}")
        if unexpected:
            problems.append(f"unexpected keys: {', '.join(unexpected)}")
        for full, _, _, old in slots:
            new = state_dict.get(full)
            if new is None:
                continue
            if not isinstance(new, torch.Tensor):
                problems.append(f"{full}: expected a tensor, got {type(new).__name__}")
            elif new.shape != old.shape:
                problems.append(
                    f"{full}: shape mismatch, expected {tuple(old.shape)}, got {tuple(new.shape)}"
                )
            elif new.dtype != old.dtype:
                problems.append(f"{full}: dtype mismatch, expected {old.dtype}, got {new.dtype}")
        if problems:
            raise StateDictError(
                f"cannot load state dict into {type(self).__name__}:\n  " + "\n  ".join(problems)
            )
        for full, owner, name, _ in slots:  # 全部检查通过之后才动手替换
            setattr(owner, name, state_dict[full])


T = TypeVar("T", bound=BaseOP)


class OPList(BaseOP, Generic[T]):
    """一串同类的层（比如解码层）。权重名用下标：``layers.0.xxx``、``layers.1.xxx``。"""

    def __init__(self, ops: list[T]) -> None:
        self._ops = list(ops)

    def _children(self) -> Iterator[tuple[str, torch.Tensor | BaseOP]]:
        for i, op in enumerate(self._ops):
            yield str(i), op

    def __iter__(self) -> Iterator[T]:
        return iter(self._ops)

    def __len__(self) -> int:
        return len(self._ops)

    def __getitem__(self, i: int) -> T:
        return self._ops[i]
