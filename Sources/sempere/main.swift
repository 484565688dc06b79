await SempereCommand.main()
