import Foundation

/// The one loader for the test vectors in `../shared/vectors` (its README lists the formats).
///
/// Vectors are read in place from `$SIBLINGS_VECTORS` (default `../shared/vectors` beside the package
/// root); they are never copied into the repository. A missing folder or file is a thrown
/// ``VectorError`` whose message says what to do: tests fail, never skip.
public enum Vectors {
    /// The package root (two folders above this file's folder).
    public static let packageRoot: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The vectors folder.
    public static func root(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> URL {
        let configured = environment["SIBLINGS_VECTORS"].flatMap { $0.isEmpty ? nil : $0 }
        let path = configured ?? "../shared/vectors"
        let url =
            path.hasPrefix("/")
            ? URL(fileURLWithPath: path) : packageRoot.appendingPathComponent(path).standardizedFileURL
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw VectorError(
                "the test vectors are missing: no folder at \(url.path)"
                    + (configured == nil
                        ? " (the default, ../shared/vectors beside the repository)" : " (from $SIBLINGS_VECTORS)")
                    + ". Put the shared/ folder beside the repository, or set SIBLINGS_VECTORS to the vectors folder.")
        }
        return url
    }

    /// The file at `relativePath` inside the vectors folder.
    public static func url(_ relativePath: String) throws -> URL {
        let url = try root().appendingPathComponent(relativePath)
        guard FileManager.default.fileExists(atPath: url.path) else {
            throw VectorError("the vector file \(relativePath) is missing from \(try root().path)")
        }
        return url
    }

    /// The bytes of a vector file; `.gz` files are decompressed.
    public static func data(_ relativePath: String) throws -> Data {
        let raw = try Data(contentsOf: url(relativePath))
        return relativePath.hasSuffix(".gz") ? try Inflater.inflate(raw) : raw
    }

    /// Every file name in a vectors subfolder, sorted.
    public static func files(in folder: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: url(folder).path).sorted()
    }

    /// The records of a `key = value` file (NIST `.rsp`, pyca's `.txt`, the CCTV `.txt` files).
    ///
    /// - `key = value`, `key= value` and `key=value` all parse; keys keep their case but are looked up
    ///   case-insensitively.
    /// - A line whose key is `startKey` (default `count`) starts a new record; without a `startKey`
    ///   match, blank lines separate records.
    /// - `[name = value]` section lines apply to every following record until the next one.
    /// - A line that is a bare word (NIST's `FAIL`) is a flag: a key with an empty value.
    /// - `#` starts a comment line.
    public static func records(_ relativePath: String, startKey: String? = "count") throws -> [VectorRecord] {
        let text = String(decoding: try data(relativePath), as: UTF8.self)
        return try VectorRecord.parse(text, file: relativePath, startKey: startKey)
    }

    /// A JSON vector file decoded as `T`.
    public static func json<T: Decodable>(_ type: T.Type, _ relativePath: String) throws -> T {
        do {
            return try JSONDecoder().decode(T.self, from: data(relativePath))
        } catch let error as VectorError {
            throw error
        } catch {
            throw VectorError("\(relativePath) is not the JSON the test expects: \(error)")
        }
    }
}

/// Our own pinned vectors (Tests/Reference/pinned_vectors.py): JSON files committed beside the tests
/// that read them, unlike the outside vectors in `$SIBLINGS_VECTORS`.
public enum PinnedVectors {
    /// The JSON file `name` in the folder of the test file `filePath`, decoded as `T` with snake-case keys.
    public static func load<T: Decodable>(
        _ type: T.Type, _ name: String, beside filePath: String = #filePath
    ) throws -> T {
        let url = URL(fileURLWithPath: filePath).deletingLastPathComponent().appendingPathComponent(name)
        guard let data = FileManager.default.contents(atPath: url.path) else {
            throw VectorError("\(url.path) is missing; run .venv/bin/python Tests/Reference/pinned_vectors.py")
        }
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        do {
            return try decoder.decode(T.self, from: data)
        } catch {
            throw VectorError("\(url.path) is not the JSON the test expects: \(error)")
        }
    }

    /// A hex field of a pinned vector.
    public static func hex(_ text: String) throws -> Data {
        guard let data = Data(hex: text) else { throw VectorError("not hex: \(text.prefix(40))") }
        return data
    }
}

/// A vector file that is missing or does not parse.
public struct VectorError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// One record of a `key = value` vector file.
public struct VectorRecord: Sendable, CustomStringConvertible {
    /// The fields in file order (section values first).
    public let fields: [(key: String, value: String)]
    public let file: String
    public let line: Int

    public var description: String { "\(file):\(line)" }

    /// The value of `key` (case-insensitive), or nil.
    public subscript(_ key: String) -> String? {
        let lowered = key.lowercased()
        return fields.last { $0.key.lowercased() == lowered }?.value
    }

    /// Whether the record has `key`, with or without a value (NIST's bare `FAIL`).
    public func has(_ key: String) -> Bool { self[key] != nil }

    /// The value of `key` (case-insensitive); throws if absent.
    public func string(_ key: String) throws -> String {
        guard let value = self[key] else { throw VectorError("\(self) has no field \(key)") }
        return value
    }

    /// The bytes of `key`: hex, or a double-quoted string's UTF-8; an empty value is empty bytes.
    public func bytes(_ key: String) throws -> Data {
        let value = try string(key)
        if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") {
            return Data(value.dropFirst().dropLast().utf8)
        }
        guard let bytes = Data(hex: value) else { throw VectorError("\(self): \(key) is not hex: \(value.prefix(40))") }
        return bytes
    }

    /// The decimal integer value of `key`.
    public func int(_ key: String) throws -> Int {
        guard let value = Int(try string(key)) else { throw VectorError("\(self): \(key) is not a decimal number") }
        return value
    }

    static func parse(_ text: String, file: String, startKey: String?) throws -> [VectorRecord] {
        var records: [VectorRecord] = []
        var section: [(key: String, value: String)] = []
        var current: [(key: String, value: String)] = []
        var currentLine = 0
        let start = startKey?.lowercased()
        let usesStartKey =
            start.map { key in
                text.split(whereSeparator: \.isNewline).contains {
                    $0.split(separator: "=").first?.trimmed.lowercased() == key
                }
            } ?? false

        func flush() {
            if !current.isEmpty {
                records.append(VectorRecord(fields: section + current, file: file, line: currentLine))
            }
            current = []
        }

        for (index, rawLine) in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).enumerated() {
            let line = rawLine.trimmed
            if line.isEmpty {
                if !usesStartKey { flush() }
                continue
            }
            if line.hasPrefix("#") { continue }
            if line.hasPrefix("[") && line.hasSuffix("]") {
                flush()
                let inner = line.dropFirst().dropLast()
                let parts = inner.split(separator: "=", maxSplits: 1)
                let key = String(parts[0].trimmed)
                let value = parts.count > 1 ? String(parts[1].trimmed) : ""
                section.removeAll { $0.key == key }
                section.append((key, value))
                continue
            }
            let parts = line.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let key = String(parts[0].trimmed)
            let value = parts.count > 1 ? String(parts[1].trimmed) : ""
            if usesStartKey, key.lowercased() == start { flush() }
            if current.isEmpty { currentLine = index + 1 }
            current.append((key, value))
        }
        flush()
        guard !records.isEmpty else { throw VectorError("\(file) has no records") }
        return records
    }
}

extension Substring {
    fileprivate var trimmed: Substring {
        var result = self
        while let first = result.first, first.isWhitespace { result = result.dropFirst() }
        while let last = result.last, last.isWhitespace { result = result.dropLast() }
        return result
    }
}

extension Data {
    /// Decodes hex (either case); nil on odd length or a non-hex character. Test-side, so it does not
    /// share the crypto core's decoder: a bug there cannot hide in both the code and its vectors.
    public init?(hex: String) {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(hex.utf8.count / 2)
        var high: UInt8?
        for c in hex.utf8 {
            let nibble: UInt8
            switch c {
            case 48...57: nibble = c - 48
            case 97...102: nibble = c - 87
            case 65...70: nibble = c - 55
            default: return nil
            }
            if let h = high {
                bytes.append(h << 4 | nibble)
                high = nil
            } else {
                high = nibble
            }
        }
        guard high == nil else { return nil }
        self.init(bytes)
    }

    /// Lower-case hex.
    public var hex: String { map { String(format: "%02x", $0) }.joined() }
}
