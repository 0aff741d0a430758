"""Helpers on an ``ExportedProgram``'s graph that every stage of the pipeline shares.

Passes, backends' lowering and emission all read constant placeholders, fix the graph signature after a
rewrite and carry debug handles; these modules hold that code once. They import nothing of etkit outside
this package, so any layer may use them (``tests/core/test_import_graph.py`` checks the layering):

- :mod:`.signature`: which placeholder is a constant or a user input; renaming an output.
- :mod:`.constants`: the tensor behind a constant placeholder; adding and dropping lifted constants.
- :mod:`.debug_handles`: the integer id of every Edge operator node.
"""
