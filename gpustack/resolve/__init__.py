"""From config files to a resolved `Stack`: the typed config and profiles, the layers merged
and located, the checks of a config against its platform, and the platform facts they use."""
