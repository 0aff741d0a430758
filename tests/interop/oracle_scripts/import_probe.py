"""Oracle probe: print the executorch package location, then try importing each module named in argv."""
import sys

import executorch

print("executorch", list(executorch.__path__)[0])  # a namespace package: no __file__
for name in sys.argv[1:]:
    try:
        __import__(name)
        print(name, "imported")
    except ImportError as e:
        print(name, "ImportError:", e)
