import Foundation

/// The age ASCII armor (age spec, "ASCII armor"): strict PEM with the label "AGE ENCRYPTED FILE",
/// padded standard base64 in 64-column lines. Whitespace is allowed before the first line and after the
/// last, and a line may end in CRLF instead of LF; nothing else is tolerated.
enum AgeArmor {
    static let begin = "-----BEGIN AGE ENCRYPTED FILE-----"
    static let end = "-----END AGE ENCRYPTED FILE-----"
    static let columns = 64

    static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0a || byte == 0x0d || byte == 0x0b || byte == 0x0c
    }

    static func failure(_ reason: String) -> AgeError {
        AgeError(.armorFailure, "the ASCII armor is malformed: \(reason); the file was altered or is not armored age")
    }

    /// Decodes armor from `input` one line at a time, as a ``ByteInput/Source``.
    final class Decoder {
        private let input: ByteInput
        private var started = false
        private var finished = false
        private var sawShortLine = false

        init(_ input: ByteInput) { self.input = input }

        /// One line without its `\n` and an optional `\r` before it; `terminated` says whether a `\n` ended it.
        private func line() throws -> (text: Data, terminated: Bool)? {
            guard
                var line = try input.readLine(
                    limit: 1024, tooLong: AgeArmor.failure("a line is longer than \(AgeArmor.columns) columns"))
            else { return nil }
            let terminated = line.last == 0x0a
            if terminated { line.removeLast() }
            if terminated, line.last == 0x0d { line.removeLast() }
            return (line, terminated)
        }

        func read(_: Int) throws -> Data? {
            if finished { return nil }
            if !started {
                try input.skip(while: AgeArmor.isWhitespace)
                guard let first = try line(), first.terminated, first.text == Data(AgeArmor.begin.utf8) else {
                    throw AgeArmor.failure("the first line is not exactly \"\(AgeArmor.begin)\"")
                }
                started = true
            }
            guard let (text, terminated) = try line() else {
                throw AgeArmor.failure("the file ends without the \"\(AgeArmor.end)\" line")
            }
            if text == Data(AgeArmor.end.utf8) {
                try input.skip(while: AgeArmor.isWhitespace)
                guard try input.peek(1).isEmpty else {
                    throw AgeArmor.failure("there is data after the \"\(AgeArmor.end)\" line")
                }
                finished = true
                return nil
            }
            guard !sawShortLine else {
                throw AgeArmor.failure("a line shorter than \(AgeArmor.columns) columns is not the last one")
            }
            guard terminated else { throw AgeArmor.failure("the file ends without the \"\(AgeArmor.end)\" line") }
            guard !text.isEmpty else { throw AgeArmor.failure("there is an empty line") }
            guard text.count <= AgeArmor.columns else {
                throw AgeArmor.failure("a line is longer than \(AgeArmor.columns) columns")
            }
            if text.count < AgeArmor.columns { sawShortLine = true }
            guard let decoded = StrictBase64.decodePadded(String(decoding: text, as: UTF8.self)) else {
                throw AgeArmor.failure("a line is not canonical padded base64")
            }
            return decoded
        }
    }

    /// Encodes to armor, passing whole lines to `write` as the bytes come.
    final class Encoder {
        private let write: (Data) throws -> Void
        private var pending = Data()
        private static let lineBytes = 48

        init(_ write: @escaping (Data) throws -> Void) throws {
            self.write = write
            try write(Data((AgeArmor.begin + "\n").utf8))
        }

        func write(_ data: Data) throws {
            pending.append(data)
            let whole = pending.count / Self.lineBytes * Self.lineBytes
            guard whole > 0 else { return }
            try emit(pending.prefix(whole))
            pending = Data(pending.dropFirst(whole))
        }

        private func emit(_ data: Data) throws {
            let text = data.base64EncodedString(options: [.lineLength64Characters, .endLineWithLineFeed])
            try write(Data((text + "\n").utf8))
        }

        func finish() throws {
            if !pending.isEmpty { try emit(pending) }
            pending = Data()
            try write(Data((AgeArmor.end + "\n").utf8))
        }
    }
}
