internal import CZlib
import Foundation

/// zlib and gzip decompression for compressed vector files (the CCTV age vectors marked
/// `compressed: zlib` and the `.gz` ML-KEM modulus vectors).
public enum Inflater {
    /// Inflates a zlib or gzip stream (detected from its header).
    public static func inflate(_ compressed: Data) throws -> Data {
        try InflateStream().inflate(compressed)
    }
}

/// Owns one `z_stream` set up for inflation.
private final class InflateStream {
    private var stream = z_stream()

    init() throws {
        // 15 + 32: any window size, zlib or gzip header auto-detected.
        let result = CZlib_inflateInit2(&stream, 15 + 32)
        guard result == Z_OK else { throw VectorError("zlib inflateInit2 failed (\(result))") }
    }

    func inflate(_ compressed: Data) throws -> Data {
        var output = Data()
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        try compressed.withUnsafeBytes { (input: UnsafeRawBufferPointer) in
            stream.next_in = UnsafeMutablePointer(mutating: input.bindMemory(to: UInt8.self).baseAddress)
            stream.avail_in = UInt32(input.count)
            while true {
                let result = chunk.withUnsafeMutableBufferPointer { buffer -> Int32 in
                    stream.next_out = buffer.baseAddress
                    stream.avail_out = UInt32(buffer.count)
                    return CZlib.inflate(&stream, Z_NO_FLUSH)
                }
                output.append(contentsOf: chunk[0..<(chunk.count - Int(stream.avail_out))])
                if result == Z_STREAM_END { return }
                guard result == Z_OK else {
                    throw VectorError("the compressed vector data is corrupt (zlib error \(result))")
                }
                if stream.avail_in == 0 && stream.avail_out != 0 {
                    throw VectorError("the compressed vector data is truncated")
                }
            }
        }
        return output
    }

    deinit { inflateEnd(&stream) }
}
