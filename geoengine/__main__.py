from geoengine.cli import main
import sys
sys.exit(main())
