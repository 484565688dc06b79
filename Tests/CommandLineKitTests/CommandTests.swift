import CommandLineKit
import Testing

struct Tool: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tool", abstract: "A test tool.", version: "tool 1.2.3",
        subcommands: [Greet.self, Sum.self, Join.self, Upload.self, Download.self])
}

/// Options two commands share.
struct Connection: ParsableArguments {
    @Option(name: .long("server"), help: "The server.") var server: String
    @Flag(name: .long("verbose"), help: "Say more.") var verbose: Bool
}

struct Upload: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "upload", abstract: "Upload a file.")

    @OptionGroup var connection: Connection
    @Argument(help: "The file.") var file: String
}

struct Download: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "download", abstract: "Download a file.")

    @Option(name: .long("to"), help: "Where.") var to: String = "."
    @OptionGroup var connection: Connection
}

struct Greet: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "greet", abstract: "Say hello.")

    @Option(name: .long("greeting", short: "g"), help: "The greeting.") var greeting: String = "hello"
    @Flag(name: .long("json"), help: "Print JSON.") var json: Bool
    @OptionalOption(name: .long("times"), help: "How many times.") var times: Int?
    @Argument(help: "Who to greet.") var name: String

    func validate() throws {
        if let times, times < 1 { throw ValidationError("--times must be at least 1") }
    }
}

struct Sum: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "sum", abstract: "Add two numbers.")

    @Option(name: .long("scale"), help: "Multiply the result.") var scale: Int
    @Argument(help: "The first.") var first: Int
    @Argument(help: "The second.") var second: Int = 0
}

struct Join: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "join", abstract: "Join files.")

    @Flag(name: .long("sorted"), help: "Sort them.") var sorted: Bool
    @Arguments(help: "The files.") var files: [String]
}

@Suite("CommandLineKit")
struct CommandTests {
    func parse(_ words: [String]) throws -> any ParsableCommand { try Tool.parseAsRoot(words) }

    func usageMessage(_ words: [String]) -> String? {
        do {
            _ = try parse(words)
            return nil
        } catch CommandLineError.usage(let message, _) {
            return message
        } catch {
            return "unexpected: \(error)"
        }
    }

    @Test("an option group's declarations are the command's own, in parsing, errors and help")
    func optionGroups() throws {
        let upload = try #require(try parse(["upload", "--server", "s1", "--verbose", "a.txt"]) as? Upload)
        #expect(upload.connection.server == "s1" && upload.connection.verbose && upload.file == "a.txt")
        let download = try #require(try parse(["download", "--server", "s2", "--to", "/tmp"]) as? Download)
        #expect(download.connection.server == "s2" && !download.connection.verbose && download.to == "/tmp")
        #expect(usageMessage(["download"])?.contains("--server") == true)
        let help = Upload.helpMessage(path: ["tool", "upload"])
        #expect(help.contains("--server") && help.contains("--verbose") && help.contains("Say more."), "\(help)")
    }

    @Test("options, flags and arguments in every spelling")
    func spellings() throws {
        let plain = try #require(try parse(["greet", "Ada"]) as? Greet)
        #expect(plain.name == "Ada" && plain.greeting == "hello" && !plain.json && plain.times == nil)
        let long = try #require(try parse(["greet", "--greeting", "hi", "--json", "--times", "3", "Ada"]) as? Greet)
        #expect(long.greeting == "hi" && long.json && long.times == 3)
        let attached = try #require(try parse(["greet", "--greeting=hey", "-g", "yo", "--", "-dashed"]) as? Greet)
        #expect(attached.greeting == "yo" && attached.name == "-dashed")
        let sum = try #require(try parse(["sum", "--scale", "2", "40"]) as? Sum)
        #expect(sum.first == 40 && sum.second == 0 && sum.scale == 2)
    }

    @Test("a repeated argument takes every remaining word, at least one")
    func repeated() throws {
        let join = try #require(try parse(["join", "a", "--sorted", "b", "c"]) as? Join)
        #expect(join.files == ["a", "b", "c"] && join.sorted)
        #expect(usageMessage(["join"]) == "missing <files>")
        #expect(Join.helpMessage().contains("USAGE: join [--sorted] <files> ..."))
    }

    @Test("usage errors say what is wrong")
    func usageErrors() {
        #expect(usageMessage(["greet"]) == "missing <name>")
        #expect(usageMessage(["greet", "Ada", "--nope"]) == "unknown option '--nope'")
        #expect(usageMessage(["greet", "Ada", "--greeting"]) == "'--greeting' needs a value <greeting>")
        #expect(usageMessage(["greet", "Ada", "--times", "x"]) == "'x' is not a valid <times> for '--times'")
        #expect(usageMessage(["greet", "Ada", "--times", "0"]) == "--times must be at least 1")
        #expect(usageMessage(["greet", "Ada", "Bob"]) == "unexpected argument 'Bob'")
        #expect(usageMessage(["greet", "--json=yes", "Ada"]) == "'--json' takes no value")
        #expect(usageMessage(["sum", "1"]) == "missing '--scale <scale>'")
        #expect(usageMessage(["frobnicate"])?.hasPrefix("unknown subcommand 'frobnicate'") == true)
    }

    @Test("--help and --version")
    func helpAndVersion() throws {
        do {
            _ = try parse(["greet", "--help"])
            Issue.record("--help did not end parsing")
        } catch CommandLineError.help(let text) {
            #expect(text.contains("OVERVIEW: Say hello."))
            #expect(text.contains("USAGE: tool greet [--greeting <greeting>] [--json] [--times <times>] <name>"))
            #expect(text.contains("--greeting, -g <greeting>"))
            #expect(text.contains("<name>") && text.contains("Who to greet."))
        }
        do {
            _ = try parse(["--version"])
            Issue.record("--version did not end parsing")
        } catch CommandLineError.version(let text) {
            #expect(text == "tool 1.2.3")
        }
        let top = Tool.helpMessage()
        #expect(top.contains("SUBCOMMANDS:") && top.contains("greet") && top.contains("Add two numbers."))
    }

    @Test("`tool help <subcommand>`, which the help text advertises, shows that subcommand's help")
    func helpSubcommand() throws {
        #expect(Tool.helpMessage().contains("See 'tool help <subcommand>'"))
        do {
            _ = try parse(["help", "greet"])
            Issue.record("help greet did not end parsing")
        } catch CommandLineError.help(let text) {
            #expect(text.contains("OVERVIEW: Say hello.") && text.contains("USAGE: tool greet"))
        }
        do {
            _ = try parse(["help"])
            Issue.record("help did not end parsing")
        } catch CommandLineError.help(let text) {
            #expect(text.contains("SUBCOMMANDS:"))
        }
        #expect(usageMessage(["help", "nope"])?.contains("unknown subcommand 'nope'") == true)
        #expect(usageMessage(["help", "greet", "more"])?.contains("has no subcommands") == true)
    }
}

struct Runner: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "runner", abstract: "A tool with a default subcommand.", subcommands: [Start.self, Sum.self],
        defaultSubcommand: Start.self)
}

struct Start: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "start", abstract: "Start things.")

    @OptionalOption(name: .long("port"), help: "A port.") var port: Int?
    @Arguments(help: "What to start.") var things: [String] = []
}

@Suite("CommandLineKit default subcommand")
struct DefaultSubcommandTests {
    @Test("words that name no subcommand go to the default one, as in swift-argument-parser")
    func defaultSubcommand() throws {
        let bare = try #require(try Runner.parseAsRoot([]) as? Start)
        #expect(bare.things.isEmpty && bare.port == nil)
        let flagged = try #require(try Runner.parseAsRoot(["--port", "9"]) as? Start)
        #expect(flagged.port == 9)
        let named = try #require(try Runner.parseAsRoot(["alpha", "beta", "--port", "1"]) as? Start)
        #expect(named.things == ["alpha", "beta"] && named.port == 1)
        let explicit = try #require(try Runner.parseAsRoot(["start", "alpha"]) as? Start)
        #expect(explicit.things == ["alpha"])
        // A real subcommand still wins over the default.
        #expect(try Runner.parseAsRoot(["sum", "--scale", "2", "1"]) is Sum)
    }
}
