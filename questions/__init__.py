"""The question library. This folder ships inside the wheel as the package ``mlpsych.library`` (see pyproject.toml),
so ``--questions mlpsych`` works wherever mlpsych is installed; add your own templates here or anywhere else."""
