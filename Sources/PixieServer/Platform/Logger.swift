import Foundation
import Synchronization

/// Structured logs: one JSON object per line (`ts`, `level`, `service`, `msg`, then the fields), written to
/// standard error by default, so an operator's collector can parse every line.
public struct Logger: Sendable {
    public enum Level: Int, Sendable, Comparable, CaseIterable {
        case debug, info, warning, error

        public var name: String {
            switch self {
            case .debug: "debug"
            case .info: "info"
            case .warning: "warning"
            case .error: "error"
            }
        }

        public init?(name: String) {
            guard let level = Self.allCases.first(where: { $0.name == name.lowercased() }) else { return nil }
            self = level
        }

        public static func < (lhs: Level, rhs: Level) -> Bool { lhs.rawValue < rhs.rawValue }
    }

    /// Receives each finished line (without the newline).
    public typealias Sink = @Sendable (String) -> Void

    public let service: String
    public let minimumLevel: Level
    private let sink: Sink
    private let clock: PixieClock

    public init(service: String, minimumLevel: Level = .info, clock: PixieClock = .system, sink: @escaping Sink) {
        self.service = service
        self.minimumLevel = minimumLevel
        self.sink = sink
        self.clock = clock
    }

    /// Lines go to standard error, whole lines at a time even from several threads.
    public static func standardError(service: String, minimumLevel: Level = .info) -> Logger {
        Logger(service: service, minimumLevel: minimumLevel) { line in
            standardErrorLock.withLock { _ in FileHandle.standardError.write(Data((line + "\n").utf8)) }
        }
    }

    /// Discards everything; for tests that do not look at logs.
    public static let discard = Logger(service: "test", minimumLevel: .error) { _ in }

    /// The same sink under another service name (`identity`, `phone-verify`).
    public func named(_ service: String) -> Logger {
        Logger(service: service, minimumLevel: minimumLevel, clock: clock, sink: sink)
    }

    public func log(_ level: Level, _ message: String, _ fields: [String: any Sendable] = [:]) {
        guard level >= minimumLevel else { return }
        var object: [String: Any] = [
            "ts": Self.timestamp(clock.now()), "level": level.name, "service": service, "msg": message,
        ]
        for (key, value) in fields where object[key] == nil {
            switch value {
            case let value as String: object[key] = value
            case let value as Int: object[key] = value
            case let value as Double: object[key] = value
            case let value as Bool: object[key] = value
            default: object[key] = String(describing: value)
            }
        }
        guard
            let data = try? JSONSerialization.data(
                withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
        else { return }
        sink(String(decoding: data, as: UTF8.self))
    }

    public func debug(_ message: String, _ fields: [String: any Sendable] = [:]) { log(.debug, message, fields) }
    public func info(_ message: String, _ fields: [String: any Sendable] = [:]) { log(.info, message, fields) }
    public func warning(_ message: String, _ fields: [String: any Sendable] = [:]) { log(.warning, message, fields) }
    public func error(_ message: String, _ fields: [String: any Sendable] = [:]) { log(.error, message, fields) }

    private static func timestamp(_ date: Date) -> String {
        Date.ISO8601FormatStyle(includingFractionalSeconds: true).format(date)
    }
}

private let standardErrorLock = Mutex(())
