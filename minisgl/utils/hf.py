"""和 Hugging Face 打交道：找到模型文件夹、读 config.json、加载分词器。

模型可以用两种方式给出：本地文件夹（``models/tiny-qwen3``），或 Hub 上的名字
（``Qwen/Qwen3-0.6B``）。``resolve_model_path`` 把两者统一成一个本地文件夹：本地有就直接用，
没有就用 huggingface_hub 下载到它的缓存里（下载过的不会再下载）。之后的代码只和本地文件夹打交道。

huggingface_hub 和 transformers 都只在函数里导入：``minisgl.utils`` 在别人要某个名字时会逐个
导入子模块去找，不能因为路过这个文件就多花两秒钟导入 transformers。
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = ["load_hf_config", "load_tokenizer", "resolve_model_path"]

# 从 Hub 下载时只要这些文件：配置、分词器、权重。很多仓库里还放着 .bin/.pth/.gguf 等
# 同一份权重的其他格式，全下载下来要多花几倍的时间和磁盘
CONFIG_PATTERNS = [
    "config.json",
    "generation_config.json",
    "tokenizer*",
    "special_tokens_map.json",
    "vocab*",
    "merges.txt",
    "chat_template*",
]
WEIGHT_PATTERNS = ["*.safetensors", "*.safetensors.index.json"]

# Hub 上的名字：``name`` 或 ``owner/name``，由字母、数字、``_``、``-``、``.`` 组成
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")


def resolve_model_path(name_or_path: str | Path, *, weights: bool = True) -> Path:
    """本地文件夹原样返回；否则当作 Hub 上的名字，下载后返回缓存里的文件夹。

    ``weights=False`` 时只下载配置和分词器（分词进程、读配置都用不着几个 GB 的权重）；
    以后再用 ``weights=True`` 调用，会把权重补进同一个缓存文件夹。

    找不到时报 ``FileNotFoundError``，说清楚本地和 Hub 各是怎么失败的：
    离线（``HF_HUB_OFFLINE=1``）、名字写错、没有网络，原因都在信息里。
    """
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        return path
    if path.exists():
        raise NotADirectoryError(f"model path {str(name_or_path)!r} is a file, not a folder")
    text = str(name_or_path)
    if not _HUB_ID.fullmatch(text):
        # 以 /、./、~ 开头或有多级目录：明显是本地路径，不必去 Hub 碰运气
        raise FileNotFoundError(f"model folder {text!r} does not exist")
    return _download(text, CONFIG_PATTERNS + (WEIGHT_PATTERNS if weights else []))


def _download(repo_id: str, patterns: list[str]) -> Path:
    from huggingface_hub import snapshot_download

    try:
        folder = snapshot_download(repo_id, allow_patterns=patterns)
    except Exception as e:  # 离线、名字不存在、没有权限、网络错误……具体原因都在 e 里
        raise FileNotFoundError(
            f"{repo_id!r} is not a local folder (relative to {Path.cwd()}), and getting it "
            f"from the Hugging Face Hub failed: {type(e).__name__}: {e}"
        ) from e
    return Path(folder)


def load_hf_config(name_or_path: str | Path) -> dict[str, Any]:
    """读模型的 ``config.json``，原样返回一个字典。

    为什么不用 ``transformers.AutoConfig``？它要求装的 transformers 认识这个模型类型，而且
    不同版本会改写字段（transformers 5 把 ``rope_theta`` 挪进了 ``rope_parameters``）。
    直接读 JSON 拿到的就是文件里写的东西，怎么解释由 ``ModelConfig.from_hf`` 决定。
    """
    folder = resolve_model_path(name_or_path, weights=False)
    file = folder / "config.json"
    if not file.is_file():
        raise FileNotFoundError(f"no config.json in {folder}")
    with open(file, encoding="utf-8") as f:
        config = json.load(f)
    if not isinstance(config, dict):
        raise ValueError(f"{file}: expected a JSON object, got {type(config).__name__}")
    return config


def load_tokenizer(name_or_path: str | Path) -> PreTrainedTokenizerBase:
    """用 transformers 的 ``AutoTokenizer`` 加载分词器（含聊天模板）。

    有的仓库把聊天模板单独放在 ``chat_template.json`` 里，老版本的 transformers 读不到，
    这里补上。
    """
    from transformers import AutoTokenizer

    folder = resolve_model_path(name_or_path, weights=False)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    extra = folder / "chat_template.json"
    if not getattr(tokenizer, "chat_template", None) and extra.is_file():
        with open(extra, encoding="utf-8") as f:
            tokenizer.chat_template = json.load(f)["chat_template"]
    return tokenizer


# >> ch08
__all__ += ["read_eos_token_ids"]


def read_eos_token_ids(name_or_path: str | Path) -> tuple[int, ...]:
    """模型的停止符：``generation_config.json`` 和 ``config.json`` 里的 ``eos_token_id`` 合在一起
    （可以是一个数，也可以是一个列表；Qwen3 的对话模型有两个）。

    调度器靠它判断请求何时结束，tokenizer 进程靠它在反分词时去掉停止符；两边读的是同一个函数，
    停在哪个 token 上、去掉哪个 token 才对得上。放在这里而不是调度器里：只是读两个 JSON 文件，
    tokenizer 进程不该为此导入调度器、Engine 和注意力后端。
    """
    folder = resolve_model_path(name_or_path, weights=False)
    ids: set[int] = set()
    for name in ("generation_config.json", "config.json"):
        file = folder / name
        if file.is_file():
            value = json.loads(file.read_text(encoding="utf-8")).get("eos_token_id")
            ids.update([value] if isinstance(value, int) else value or [])
    return tuple(sorted(ids))


# << ch08
