import Foundation

/// Bytes pulled from a source (a file handle, an armor decoder, a `Data`) a piece at a time, with the
/// little look-ahead the parsers need. Memory stays bounded by what is asked for at once.
final class ByteInput {
    /// Returns up to the given number of bytes, or nil (or empty) at the end.
    typealias Source = (Int) throws -> Data?

    /// Fills the start of the buffer it is given; returns how many bytes it wrote, 0 only at the end.
    typealias DirectSource = (UnsafeMutableRawBufferPointer) throws -> Int

    private let source: Source
    /// Reads straight into the caller's memory (``read(into:)``), skipping a `Data` per read; optional.
    private let direct: DirectSource?
    private var buffer = Data()
    private var start = 0
    private var atEnd = false

    init(_ source: @escaping Source, direct: DirectSource? = nil) {
        self.source = source
        self.direct = direct
    }

    convenience init(data: Data) {
        final class Cursor {
            var offset: Int
            init(_ offset: Int) { self.offset = offset }
        }
        let cursor = Cursor(data.startIndex)
        self.init(
            { count in
                guard cursor.offset < data.endIndex else { return nil }
                let end = data.index(cursor.offset, offsetBy: count, limitedBy: data.endIndex) ?? data.endIndex
                defer { cursor.offset = end }
                return Data(data[cursor.offset..<end])
            },
            direct: { destination in
                let count = min(destination.count, data.endIndex - cursor.offset)
                guard count > 0 else { return 0 }
                data.copyBytes(
                    to: destination.bindMemory(to: UInt8.self), from: cursor.offset..<(cursor.offset + count))
                cursor.offset += count
                return count
            })
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

    /// Consumes bytes into `destination`, first what is buffered, then straight from the source; returns how
    /// many it wrote, fewer than `destination.count` only at the end.
    func read(into destination: UnsafeMutableRawBufferPointer) throws -> Int {
        var filled = min(available, destination.count)
        if filled > 0 {
            let from = buffer.startIndex + start
            buffer.copyBytes(to: destination.bindMemory(to: UInt8.self), from: from..<(from + filled))
            start += filled
        }
        while filled < destination.count, !atEnd {
            let rest = UnsafeMutableRawBufferPointer(rebasing: destination[filled...])
            if let direct {
                let count = try direct(rest)
                if count == 0 { atEnd = true }
                filled += count
            } else {
                guard let more = try source(rest.count), !more.isEmpty else {
                    atEnd = true
                    break
                }
                let count = min(more.count, rest.count)
                more.copyBytes(to: rest.bindMemory(to: UInt8.self), from: more.startIndex..<(more.startIndex + count))
                filled += count
                if count < more.count {
                    // A source may return more than asked (the armor decoder returns whole lines): keep the rest.
                    buffer = Data(more.dropFirst(count))
                    start = 0
                }
            }
        }
        return filled
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
