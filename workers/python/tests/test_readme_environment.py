# The environment model shown in workers/python/README.md, taken from the README itself, passes
# check_model (determinism, exact restore, JSON outputs): the documented shapes of advance, observe
# and digest are ones a run accepts. Not a run (test/cross-lang covers Python environments in runs).
from pathlib import Path

from detsim_worker.sdk import EnvironmentModel
from detsim_worker.testing import check_model

README = Path(__file__).resolve().parents[1] / 'README.md'


def test_the_readme_environment_passes_check_model():
    text = README.read_text('utf-8')
    start = text.index('class Meadow(EnvironmentModel):')
    code = text[start : text.index('```', start)]
    scope: dict = {'EnvironmentModel': EnvironmentModel}
    exec(compile(code, str(README), 'exec'), scope)
    moves = ['east', 'west', 'north', 'stay']
    check_model(
        scope['Meadow'], {'size': 8}, steps=60, actions=lambda k, p: {'move': moves[(k + len(p['agentId'])) % 4]}
    )
