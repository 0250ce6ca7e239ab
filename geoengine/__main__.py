import sys

from geoengine.cli import main

sys.exit(main())
