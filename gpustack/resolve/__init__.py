"""From config files to a resolved `Stack`: the typed config and profiles, the layers merged
and located, the checks of a config against its platform and the platform facts they use, and
what else a config brings (its `patches:`, which the build applies, and the image lock beside
it). The fleet's inventory of configs and the writer of config files (`init`, `import`) sit
here too, beside the model they read and write."""
