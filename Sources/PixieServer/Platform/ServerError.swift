import Foundation

/// Errors of the server process itself (configuration, keys, storage at start-up), as opposed to the
/// ``HTTPServer/HTTPError``s a request is answered with.
public struct ServerError: Error, Sendable, CustomStringConvertible {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(_ rawValue: String) { self.rawValue = rawValue }

        /// A flag, variable or configuration file value is wrong, or a key file cannot be used.
        public static let configuration = Code("configuration")
        /// The store could not be opened or migrated.
        public static let storage = Code("storage")
        /// The HTTP listener could not start.
        public static let listen = Code("listen")
        /// An outside service (an SMS webhook) failed.
        public static let upstream = Code("upstream")

        public var description: String { rawValue }
    }

    public let code: Code
    public let reason: String
    public let file: String
    public let line: UInt

    public init(_ code: Code, _ reason: String, file: String = #fileID, line: UInt = #line) {
        self.code = code
        self.reason = reason
        self.file = file
        self.line = line
    }

    public var description: String { "ServerError.\(code): \(reason) (\(file):\(line))" }
}
