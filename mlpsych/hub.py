"""Whether the Hugging Face Hub can be reached: asked once per process, and offline for the rest of the run if not.

Without this, each model file of each model is retried five times with back-off before transformers gives up
(about 50 seconds on a machine without network, before the first clear error). One quick request decides; a
model that is not in the local cache then fails at once with the loading policy's message (``models.py``).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)

PROBE_TIMEOUT_S = 3.0
_reachable: bool | None = None  # the probe's answer, once asked


def is_local(model_id: str) -> bool:
    """A folder on disk (or a path-like id) never needs the Hub."""
    return Path(model_id).expanduser().exists() or model_id.startswith((".", "/", "~"))


def cached_config(repo_id: str) -> Path | None:
    """The config.json of the locally cached snapshot of a Hub repo, the one loading it would use (every model has
    one), found without network; None when it was never downloaded or the id is not a repo id."""
    from huggingface_hub import try_to_load_from_cache

    try:
        found = try_to_load_from_cache(repo_id, "config.json")
    except ValueError:  # not a repo id (a folder that does not exist): nothing is cached under it
        return None
    return Path(found) if isinstance(found, str) else None


def offline_unless_reachable(model_id: str) -> bool:
    """Before loading ``model_id`` from the Hub: probe it once; if unreachable, switch this process to offline
    mode (``HF_HUB_OFFLINE``) so cached models load and missing ones fail at once. True when offline."""
    global _reachable
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE or is_local(model_id):
        return bool(constants.HF_HUB_OFFLINE)
    if _reachable is None:
        _reachable = _probe(constants.ENDPOINT)
        if not _reachable:
            log.warning("the Hugging Face Hub (%s) cannot be reached: only models already on this machine are used",
                        constants.ENDPOINT)
            os.environ["HF_HUB_OFFLINE"] = "1"
            constants.HF_HUB_OFFLINE = True
    return not _reachable


def _probe(endpoint: str) -> bool:
    """Any HTTP answer means reachable (through the same session and proxies as downloads); no answer does not."""
    from huggingface_hub.utils import get_session

    try:
        get_session().head(endpoint, timeout=PROBE_TIMEOUT_S)
    except Exception as error:  # noqa: BLE001 - DNS, refused, reset, timeout, TLS: all mean "not reachable"
        log.debug("Hub probe failed: %s", error)
        return False
    return True


def unknown_to_hub(model_id: str) -> bool:
    """True only when the (reachable) Hub answers that it has no repository ``model_id``: a misspelt model in a
    question file is then said before the first paper is read, not when the model is loaded, hours into a run. Any
    other answer or failure (a gated model, a timeout) is left to the loading, as before."""
    from huggingface_hub import model_info
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

    try:
        model_info(model_id, timeout=PROBE_TIMEOUT_S)
    except GatedRepoError:  # a subclass of RepositoryNotFoundError: the repository is there
        return False
    except RepositoryNotFoundError:
        return True
    except Exception as error:  # noqa: BLE001 - the Hub did not say "no such model": let the loading decide
        log.debug("Hub lookup of %s failed: %s", model_id, error)
    return False


OFFLINE_HELP = ("To use models on a machine without internet: download them on a connected machine "
                "(`hf download MODEL_ID`) and copy its Hugging Face cache folder (~/.cache/huggingface/hub) here, "
                "or point the question file's `models:` at local model folders")
