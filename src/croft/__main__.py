import sys

from croft.app.cli import main

sys.exit(main())
