import Foundation

/// Reads a command's declared arguments and fills them from the words of a command line.
enum CommandParser {
    /// The declared options, flags and arguments of `command`, in declaration order, labelled.
    static func definitions(of command: some ParsableCommand) -> [AnyArgumentBox] { definitions(in: command) }

    /// The declarations of `value`, and of the groups (``OptionGroup``) it includes, in order. A group's copy
    /// shares its boxes with the command's, so parsing into them fills the command.
    private static func definitions(in value: Any) -> [AnyArgumentBox] {
        Mirror(reflecting: value).children.flatMap { child -> [AnyArgumentBox] in
            if let group = child.value as? OptionGroupDefinition { return definitions(in: group.group) }
            guard let definition = child.value as? ArgumentDefinition else { return [] }
            let box = definition.box
            box.label = kebabCase(String((child.label ?? "").drop(while: { $0 == "_" })))
            return [box]
        }
    }

    static func kebabCase(_ name: String) -> String {
        var out = ""
        for character in name {
            if character.isUppercase {
                out += "-" + character.lowercased()
            } else {
                out.append(character)
            }
        }
        return out
    }

    static func parse(_ type: any ParsableCommand.Type, _ words: [String], path: [String]) throws -> any ParsableCommand
    {
        let configuration = type.configuration
        if let first = words.first, !first.hasPrefix("-") {
            if let subcommand = configuration.subcommands.first(where: { $0.configuration.commandName == first }) {
                return try parse(subcommand, Array(words.dropFirst()), path: path + [first])
            }
            // `tool help [subcommand ...]`, as in swift-argument-parser and git: the help of the command named.
            if first == "help", !configuration.subcommands.isEmpty {
                throw helpRequest(type, Array(words.dropFirst()), path: path)
            }
        }
        if words.contains("--help") || words.contains("-h") {
            throw CommandLineError.help(HelpGenerator.help(for: type, path: path))
        }
        if let version = configuration.version, words.contains("--version") {
            throw CommandLineError.version(version)
        }
        // As in swift-argument-parser: words that do not name a subcommand go to the default one.
        if let defaultSubcommand = configuration.defaultSubcommand {
            return try parse(defaultSubcommand, words, path: path + [defaultSubcommand.configuration.commandName])
        }

        return try parseLeaf(type, words, path: path)
    }

    /// The help of the subcommand that `words` name under `type` (`help devices approve`), or a usage error
    /// naming the word that is not a subcommand.
    static func helpRequest(
        _ type: any ParsableCommand.Type, _ words: [String], path: [String]
    ) -> CommandLineError {
        var type = type
        var path = path
        for word in words {
            guard let subcommand = type.configuration.subcommands.first(where: { $0.configuration.commandName == word })
            else {
                let names = type.configuration.subcommands.map { $0.configuration.commandName }
                return CommandLineError.usage(
                    message: names.isEmpty
                        ? "'\(path.joined(separator: " "))' has no subcommands, so there is no help for '\(word)'"
                        : "unknown subcommand '\(word)'; the subcommands are \(names.joined(separator: ", "))",
                    command: path.joined(separator: " "))
            }
            type = subcommand
            path.append(word)
        }
        return CommandLineError.help(HelpGenerator.help(for: type, path: path))
    }

    /// Parses the words of a command that is not dispatching to a subcommand.
    static func parseLeaf<Command: ParsableCommand>(
        _ type: Command.Type, _ words: [String], path: [String]
    ) throws
        -> Command
    {
        let configuration = type.configuration
        let commandPath = path.joined(separator: " ")
        var command = Command()
        let definitions = definitions(of: command)
        var positionals = definitions.filter { if case .argument = $0.kind { return true } else { return false } }[...]
        var index = 0
        var onlyPositionals = false

        func find(_ word: String) -> AnyArgumentBox? {
            definitions.first { box in
                switch box.kind {
                case .option(let name), .flag(let name):
                    if word.hasPrefix("--") { return name.long == String(word.dropFirst(2)) }
                    return word.count == 2 && name.short == word.last
                case .argument:
                    return false
                }
            }
        }

        while index < words.count {
            let word = words[index]
            index += 1
            if !onlyPositionals && word == "--" {
                onlyPositionals = true
                continue
            }
            if !onlyPositionals && word.hasPrefix("-") && word.count > 1 {
                var name = word
                var attached: String?
                if word.hasPrefix("--"), let equals = word.firstIndex(of: "=") {
                    name = String(word[..<equals])
                    attached = String(word[word.index(after: equals)...])
                }
                guard let box = find(name) else {
                    if configuration.subcommands.isEmpty {
                        throw CommandLineError.usage(message: "unknown option '\(name)'", command: commandPath)
                    }
                    throw CommandLineError.usage(
                        message: "unknown option '\(name)'; did you mean a subcommand? "
                            + configuration.subcommands.map { $0.configuration.commandName }.joined(separator: ", "),
                        command: commandPath)
                }
                switch box.kind {
                case .flag:
                    guard attached == nil else {
                        throw CommandLineError.usage(message: "'\(name)' takes no value", command: commandPath)
                    }
                    _ = box.set("")
                case .option:
                    let value: String
                    if let attached {
                        value = attached
                    } else {
                        guard index < words.count else {
                            throw CommandLineError.usage(
                                message: "'\(name)' needs a value <\(box.valueName)>", command: commandPath)
                        }
                        value = words[index]
                        index += 1
                    }
                    guard box.set(value) else {
                        throw CommandLineError.usage(
                            message: "'\(value)' is not a valid <\(box.valueName)> for '\(name)'", command: commandPath)
                    }
                case .argument:
                    break
                }
                continue
            }
            if let first = configuration.subcommands.first, positionals.isEmpty {
                throw CommandLineError.usage(
                    message: "unknown subcommand '\(word)'; the subcommands are "
                        + configuration.subcommands.map { $0.configuration.commandName }.joined(separator: ", ")
                        + " (for example '\(commandPath) \(first.configuration.commandName)')",
                    command: commandPath)
            }
            guard let box = positionals.first.map({ $0.isRepeating ? $0 : positionals.removeFirst() }) else {
                throw CommandLineError.usage(message: "unexpected argument '\(word)'", command: commandPath)
            }
            guard box.set(word) else {
                throw CommandLineError.usage(
                    message: "'\(word)' is not a valid <\(box.valueName)>", command: commandPath)
            }
        }

        for box in definitions where box.isRequired && !box.wasSet {
            switch box.kind {
            case .option(let name):
                throw CommandLineError.usage(
                    message: "missing '\(name.long.map { "--\($0)" } ?? "-\(name.short!)") <\(box.valueName)>'",
                    command: commandPath)
            case .argument:
                throw CommandLineError.usage(message: "missing <\(box.valueName)>", command: commandPath)
            case .flag:
                break
            }
        }
        do {
            try command.validate()
        } catch let error as ValidationError {
            throw CommandLineError.usage(message: error.description, command: commandPath)
        }
        return command
    }
}

/// The generated `--help` text.
enum HelpGenerator {
    static func help(for type: any ParsableCommand.Type, path: [String]) -> String {
        let configuration = type.configuration
        let definitions = CommandParser.definitions(of: type.init())
        var lines: [String] = []
        if !configuration.abstract.isEmpty { lines += ["OVERVIEW: \(configuration.abstract)", ""] }
        if !configuration.discussion.isEmpty { lines += [configuration.discussion, ""] }

        var usage = "USAGE: " + path.joined(separator: " ")
        if !configuration.subcommands.isEmpty { usage += " <subcommand>" }
        for box in definitions {
            switch box.kind {
            case .option(let name):
                let spelled = "\(name.long.map { "--\($0)" } ?? "-\(name.short!)") <\(box.valueName)>"
                usage += box.isRequired ? " \(spelled)" : " [\(spelled)]"
            case .flag(let name):
                usage += " [\(name.long.map { "--\($0)" } ?? "-\(name.short!)")]"
            case .argument:
                let dots = box.isRepeating ? " ..." : ""
                usage += box.isRequired ? " <\(box.valueName)>\(dots)" : " [<\(box.valueName)>]\(dots)"
            }
        }
        lines += [usage, ""]

        let arguments = definitions.filter { if case .argument = $0.kind { return true } else { return false } }
        if !arguments.isEmpty {
            lines.append("ARGUMENTS:")
            lines += arguments.map { row("<\($0.valueName)>", $0.help) }
            lines.append("")
        }
        lines.append("OPTIONS:")
        for box in definitions {
            switch box.kind {
            case .option(let name):
                lines.append(row("\(name.display) <\(box.valueName)>", box.help))
            case .flag(let name):
                lines.append(row(name.display, box.help))
            case .argument:
                break
            }
        }
        if configuration.version != nil { lines.append(row("--version", "Show the version.")) }
        lines.append(row("-h, --help", "Show help information."))
        if !configuration.subcommands.isEmpty {
            lines += ["", "SUBCOMMANDS:"]
            lines += configuration.subcommands.map { row($0.configuration.commandName, $0.configuration.abstract) }
            lines += [
                "",
                "  See '\(path.joined(separator: " ")) help <subcommand>' or '... <subcommand> --help' for details.",
            ]
        }
        return lines.joined(separator: "\n")
    }

    static func row(_ left: String, _ right: String) -> String {
        let padded = left.count < 24 ? left.padding(toLength: 24, withPad: " ", startingAt: 0) : left + "  "
        return "  " + padded + right
    }
}
