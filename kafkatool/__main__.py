from kafkatool.cli import main

main()
