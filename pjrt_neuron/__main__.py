import sys

from pjrt_neuron.cli import main

sys.exit(main())
