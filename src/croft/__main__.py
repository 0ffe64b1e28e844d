from croft.app.cli import main

main()
