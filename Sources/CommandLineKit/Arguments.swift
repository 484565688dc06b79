import Foundation

/// How an option or flag is spelled on the command line.
public struct NameSpecification: Sendable, Hashable {
    public let long: String?
    public let short: Character?

    /// `--long` and, optionally, `-s`.
    public static func long(_ name: String, short: Character? = nil) -> NameSpecification {
        NameSpecification(long: name, short: short)
    }

    /// `-s` only.
    public static func short(_ character: Character) -> NameSpecification {
        NameSpecification(long: nil, short: character)
    }

    var display: String {
        [long.map { "--\($0)" }, short.map { "-\($0)" }].compactMap { $0 }.joined(separator: ", ")
    }
}

/// A value an option or argument can hold: parsed from one command-line word.
public protocol ExpressibleByArgument: Sendable {
    init?(argument: String)
    /// Shown in help, e.g. `<seconds>`; defaults to the property's name.
    static var valueName: String? { get }
}

extension ExpressibleByArgument {
    public static var valueName: String? { nil }
}

extension String: ExpressibleByArgument {
    public init?(argument: String) { self = argument }
}

extension Int: ExpressibleByArgument {
    public init?(argument: String) { self.init(argument) }
}

extension Double: ExpressibleByArgument {
    public init?(argument: String) { self.init(argument) }
}

extension UInt16: ExpressibleByArgument {
    public init?(argument: String) { self.init(argument) }
}

/// What the parser needs to know about one declared option, flag or argument, read through `Mirror`
/// from the command's stored properties.
protocol ArgumentDefinition {
    var box: AnyArgumentBox { get }
}

/// The storage every property wrapper shares with its copies: parsing writes into it.
class AnyArgumentBox: @unchecked Sendable {
    // @unchecked: written only while parsing, before the command runs, on one thread.
    enum Kind {
        case option(NameSpecification)
        case flag(NameSpecification)
        case argument
    }

    let kind: Kind
    let help: String
    var label = ""
    var wasSet = false

    init(kind: Kind, help: String) {
        self.kind = kind
        self.help = help
    }

    var isRequired: Bool { false }
    var valueName: String { label }
    /// Parses and stores one word; returns false when it does not parse.
    func set(_ word: String) -> Bool { false }
    func setFlag() {}
    var isRepeating: Bool { false }
}

final class ArgumentBox<Value: Sendable>: AnyArgumentBox, @unchecked Sendable {
    var value: Value?
    let parse: @Sendable (String) -> Value?
    let required: Bool
    let customValueName: String?

    init(
        kind: Kind, help: String, initial: Value?, required: Bool, valueName: String?,
        parse: @escaping @Sendable (String) -> Value?
    ) {
        self.value = initial
        self.parse = parse
        self.required = required
        self.customValueName = valueName
        super.init(kind: kind, help: help)
    }

    override var isRequired: Bool { required }
    override var valueName: String { customValueName ?? label }

    override func set(_ word: String) -> Bool {
        guard let parsed = parse(word) else { return false }
        value = parsed
        wasSet = true
        return true
    }
}

/// A `--name value` option. Without a default it is required.
@propertyWrapper
public struct Option<Value: ExpressibleByArgument>: ArgumentDefinition, Sendable {
    let typedBox: ArgumentBox<Value>
    var box: AnyArgumentBox { typedBox }

    public init(wrappedValue: Value, name: NameSpecification, help: String = "") {
        typedBox = ArgumentBox(
            kind: .option(name), help: help, initial: wrappedValue, required: false, valueName: Value.valueName,
            parse: { Value(argument: $0) })
    }

    public init(name: NameSpecification, help: String = "") {
        typedBox = ArgumentBox(
            kind: .option(name), help: help, initial: nil, required: true, valueName: Value.valueName,
            parse: { Value(argument: $0) })
    }

    public var wrappedValue: Value {
        guard let value = typedBox.value else {
            fatalError("a required option was read before parsing: parse with the command's main()")
        }
        return value
    }
}

/// A `--name value` option that may be absent.
@propertyWrapper
public struct OptionalOption<Value: ExpressibleByArgument>: ArgumentDefinition, Sendable {
    let typedBox: ArgumentBox<Value>
    var box: AnyArgumentBox { typedBox }

    public init(name: NameSpecification, help: String = "") {
        typedBox = ArgumentBox(
            kind: .option(name), help: help, initial: nil, required: false, valueName: Value.valueName,
            parse: { Value(argument: $0) })
    }

    public var wrappedValue: Value? { typedBox.value }
}

/// A `--name` switch, false unless given.
@propertyWrapper
public struct Flag: ArgumentDefinition, Sendable {
    let typedBox: ArgumentBox<Bool>
    var box: AnyArgumentBox { typedBox }

    public init(name: NameSpecification, help: String = "") {
        typedBox = ArgumentBox(kind: .flag(name), help: help, initial: false, required: false, valueName: nil) { _ in
            true
        }
    }

    public var wrappedValue: Bool { typedBox.value ?? false }
}

/// A positional argument. Without a default it is required.
@propertyWrapper
public struct Argument<Value: ExpressibleByArgument>: ArgumentDefinition, Sendable {
    let typedBox: ArgumentBox<Value>
    var box: AnyArgumentBox { typedBox }

    public init(wrappedValue: Value, help: String = "") {
        typedBox = ArgumentBox(
            kind: .argument, help: help, initial: wrappedValue, required: false, valueName: Value.valueName,
            parse: { Value(argument: $0) })
    }

    public init(help: String = "") {
        typedBox = ArgumentBox(
            kind: .argument, help: help, initial: nil, required: true, valueName: Value.valueName,
            parse: { Value(argument: $0) })
    }

    public var wrappedValue: Value {
        guard let value = typedBox.value else {
            fatalError("a required argument was read before parsing: parse with the command's main()")
        }
        return value
    }
}

/// A positional argument that takes every remaining word: at least one (`<files> ...`), or any number when
/// declared with a default (`@Arguments var files: [String] = []`, shown as `[<files>] ...`).
@propertyWrapper
public struct Arguments<Value: ExpressibleByArgument>: ArgumentDefinition, Sendable {
    let typedBox: RepeatingArgumentBox<Value>
    var box: AnyArgumentBox { typedBox }

    public init(help: String = "") {
        typedBox = RepeatingArgumentBox(help: help, required: true)
    }

    /// Any number of words; `wrappedValue` is what the command sees when none is given.
    public init(wrappedValue: [Value], help: String = "") {
        typedBox = RepeatingArgumentBox(help: help, required: false)
        typedBox.values = wrappedValue
        typedBox.defaults = wrappedValue
    }

    public var wrappedValue: [Value] { typedBox.values }
}

final class RepeatingArgumentBox<Value: ExpressibleByArgument>: AnyArgumentBox, @unchecked Sendable {
    var values: [Value] = []
    /// The values when no word is given; the first word replaces them.
    var defaults: [Value]? = nil
    private let required: Bool

    init(help: String, required: Bool) {
        self.required = required
        super.init(kind: .argument, help: help)
    }

    override var isRequired: Bool { required }
    override var isRepeating: Bool { true }
    override var valueName: String { Value.valueName ?? label }

    override func set(_ word: String) -> Bool {
        guard let parsed = Value(argument: word) else { return false }
        if !wasSet, defaults != nil { values = [] }
        values.append(parsed)
        wasSet = true
        return true
    }
}

/// A group of options, flags and arguments that several commands share (swift-argument-parser's
/// `ParsableArguments`): declare them once in a struct, and `@OptionGroup var setup: Setup` in each command.
public protocol ParsableArguments: Sendable {
    init()
}

/// Includes a ``ParsableArguments`` group's options in a command, in its place among the command's own
/// (swift-argument-parser's `@OptionGroup`). Check the group's values in the command's `validate()`.
@propertyWrapper
public struct OptionGroup<Value: ParsableArguments>: OptionGroupDefinition, Sendable {
    public let wrappedValue: Value

    public init() { wrappedValue = Value() }

    var group: any Sendable { wrappedValue }
}

/// What the parser looks for to read a group's own declarations.
protocol OptionGroupDefinition {
    var group: any Sendable { get }
}
