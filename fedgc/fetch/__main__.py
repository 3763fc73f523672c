import sys

from fedgc.fetch import main

sys.exit(main())
