import Foundation

/// A command's static description (swift-argument-parser's `CommandConfiguration`).
public struct CommandConfiguration: Sendable {
    public var commandName: String
    public var abstract: String
    public var discussion: String
    public var version: String?
    public var subcommands: [any ParsableCommand.Type]
    /// The subcommand to run when none is named.
    public var defaultSubcommand: (any ParsableCommand.Type)?

    public init(
        commandName: String, abstract: String = "", discussion: String = "", version: String? = nil,
        subcommands: [any ParsableCommand.Type] = [], defaultSubcommand: (any ParsableCommand.Type)? = nil
    ) {
        self.commandName = commandName
        self.abstract = abstract
        self.discussion = discussion
        self.version = version
        self.subcommands = subcommands
        self.defaultSubcommand = defaultSubcommand
    }
}

/// A command: declare its options, flags and arguments as properties with `@Option`, `@OptionalOption`,
/// `@Flag` and `@Argument`, check them in `validate()`, do the work in `run()`. Start it with
/// `await MyCommand.main()`: generated `--help` (and `--version` when configured), errors on standard
/// error, exit status 0 on success, 1 on failure, 64 (EX_USAGE) on a usage error.
public protocol ParsableCommand: Sendable {
    static var configuration: CommandConfiguration { get }
    init()
    /// Checks the parsed values together; throw `ValidationError` for a usage error.
    mutating func validate() throws
    mutating func run() async throws
}

extension ParsableCommand {
    public mutating func validate() throws {}

    /// A command with subcommands and nothing of its own to do shows its help.
    public mutating func run() async throws {
        throw CommandLineError.help(Self.helpMessage(path: [Self.configuration.commandName]))
    }
}

/// A usage error found by `validate()`: reported with a pointer to `--help`, exit status 64.
public struct ValidationError: Error, CustomStringConvertible {
    public let description: String
    public init(_ message: String) { description = message }
}

/// Ends the program with this status and no further message (the command has already said why).
public struct ExitCode: Error, Equatable {
    public let status: Int32
    public init(_ status: Int32) { self.status = status }
    public static let success = ExitCode(0)
    public static let failure = ExitCode(1)
    public static let usage = ExitCode(64)
}

/// What parsing ended with, when it did not produce a command to run.
public enum CommandLineError: Error, Equatable, CustomStringConvertible {
    /// `--help` was asked for: print this to standard output, exit 0.
    case help(String)
    /// `--version` was asked for.
    case version(String)
    /// The command line is wrong: print the message and a pointer to `--help`, exit 64.
    case usage(message: String, command: String)

    public var description: String {
        switch self {
        case .help(let text), .version(let text): return text
        case .usage(let message, let command): return "error: \(message)\nRun '\(command) --help' for usage."
        }
    }
}

extension ParsableCommand {
    /// Parses `arguments` (without the program name) into the command to run, its options set.
    public static func parseAsRoot(_ arguments: [String]) throws -> any ParsableCommand {
        try CommandParser.parse(Self.self, arguments, path: [configuration.commandName])
    }

    /// The generated help text.
    public static func helpMessage(path: [String]? = nil) -> String {
        HelpGenerator.help(for: Self.self, path: path ?? [configuration.commandName])
    }

    /// Parses the process's arguments, validates, runs, and exits with the right status.
    public static func main(_ arguments: [String]? = nil) async -> Never {
        let arguments = arguments ?? Array(CommandLine.arguments.dropFirst())
        let output = StandardStreams()
        do {
            var command = try parseAsRoot(arguments)
            try await command.run()
            exit(0)
        } catch let error as CommandLineError {
            switch error {
            case .help(let text), .version(let text):
                output.out(text)
                exit(0)
            case .usage:
                output.err(error.description)
                exit(ExitCode.usage.status)
            }
        } catch let code as ExitCode {
            exit(code.status)
        } catch {
            output.err("\(configuration.commandName): error: \(error)")
            exit(ExitCode.failure.status)
        }
    }
}

/// Writes lines to standard output and standard error, unbuffered.
public struct StandardStreams: Sendable {
    public init() {}
    public func out(_ line: String) { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }
    public func err(_ line: String) { FileHandle.standardError.write(Data((line + "\n").utf8)) }

    /// Whether colour may be used: standard output is a terminal and `NO_COLOR` is not set (no-color.org).
    public static var colorEnabled: Bool {
        ProcessInfo.processInfo.environment["NO_COLOR"].map(\.isEmpty) ?? true && isatty(STDOUT_FILENO) == 1
    }
}
