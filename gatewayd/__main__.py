from gatewayd.cli import main

raise SystemExit(main())
