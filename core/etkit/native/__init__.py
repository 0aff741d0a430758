"""Native (C++) builds against the installed packages: CMake prefixes, the selective-build kernel list,
and ``etkit runner build``."""
