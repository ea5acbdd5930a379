from tracelake.cli import main

main()
