import sys

from kafkastore.cli import main

sys.exit(main())
