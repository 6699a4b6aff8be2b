"""Example reward plugin written in Python (built with componentize-py).

Reward: the fraction of the oracle's changed files that the completion names. A sample whose
oracle changes no file is "not applicable" (reward None), which swerve leaves out of the
weighted sum, as TRL does with a reward function's None.
"""

from typing import List

import wit_world
from wit_world.imports import reward_types, types
from componentize_py_types import Err, Ok, Result


class WitWorld(wit_world.WitWorld):
    def info(self) -> types.PluginInfo:
        return types.PluginInfo(
            name="python-keywords",
            version="0.1.0",
            description="Fraction of the oracle's changed files that the completion names",
        )

    def score(self, samples: List[reward_types.Sample]) -> List[Result[reward_types.Score, str]]:
        return [self._score_one(s) for s in samples]

    def _score_one(self, sample: reward_types.Sample) -> Result[reward_types.Score, str]:
        if any(p.key == "fail" for p in sample.metadata):
            return Err(f"sample {sample.id} asked to fail")
        old = {f.path: f.content for f in sample.code_context}
        changed = [f.path for f in sample.oracle_new_content if old.get(f.path) != f.content]
        if not changed:
            return Ok(reward_types.Score(reward=None, metrics=[], message="the oracle changes no file"))
        named = sum(1 for path in changed if path in sample.completion)
        metrics = [reward_types.Metric(name="files_named", value=float(named))]
        return Ok(reward_types.Score(reward=named / len(changed), metrics=metrics, message=None))
