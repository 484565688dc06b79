import Foundation

/// Bytes pulled from a source (a file handle, an armor decoder, a `Data`) a piece at a time, with the
/// little look-ahead the parsers need. Memory stays bounded by what is asked for at once.
final class ByteInput {
    /// Returns up to the given number of bytes, or nil (or empty) at the end.
    typealias Source = (Int) throws -> Data?

    private let source: Source
    private var buffer = Data()
    private var start = 0
    private var atEnd = false

    init(_ source: @escaping Source) { self.source = source }

    convenience init(data: Data) {
        var offset = data.startIndex
        self.init { count in
            guard offset < data.endIndex else { return nil }
            let end = data.index(offset, offsetBy: count, limitedBy: data.endIndex) ?? data.endIndex
            defer { offset = end }
            return Data(data[offset..<end])
        }
    }

    /// How many bytes are buffered and not yet consumed.
    var available: Int { buffer.count - start }

    /// Buffers until at least `count` bytes are available or the source ends.
    func fill(_ count: Int) throws {
        if start > 0, start >= buffer.count / 2 {
            buffer = Data(buffer[(buffer.startIndex + start)...])
            start = 0
        }
        while available < count, !atEnd {
            guard let more = try source(max(count - available, 4096)), !more.isEmpty else {
                atEnd = true
                break
            }
            buffer.append(more)
        }
    }

    /// The next `count` bytes (fewer at the end), without consuming them.
    func peek(_ count: Int) throws -> Data {
        try fill(count)
        let from = buffer.startIndex + start
        return Data(buffer[from..<(from + min(count, available))])
    }

    /// Consumes and returns up to `count` bytes; fewer only at the end.
    func read(_ count: Int) throws -> Data {
        let data = try peek(count)
        start += data.count
        return data
    }

    /// Consumes bytes while `predicate` holds.
    func skip(while predicate: (UInt8) -> Bool) throws {
        while true {
            try fill(1)
            guard available > 0, predicate(buffer[buffer.startIndex + start]) else { return }
            start += 1
        }
    }

    /// Consumes and returns the next line with its `\n`, or what is left when the source ends first
    /// (nil when nothing is left). Throws `tooLong` when no `\n` comes within `limit` bytes.
    func readLine(limit: Int, tooLong: @autoclosure () -> Error) throws -> Data? {
        var searched = 0
        while true {
            let from = buffer.startIndex + start
            if let newline = buffer[(from + searched)...].firstIndex(of: 0x0a) {
                let line = Data(buffer[from...newline])
                start += line.count
                return line
            }
            searched = available
            guard searched <= limit else { throw tooLong() }
            let before = available
            try fill(available + 4096)
            if available == before {
                guard before > 0 else { return nil }
                return try read(before)
            }
        }
    }
}
