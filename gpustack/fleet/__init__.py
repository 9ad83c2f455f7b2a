"""Many clusters at once: rendered, validated and checked together, and the images they pull."""
