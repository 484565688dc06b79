import Foundation

/// A C2SP CCTV age test vector: `key: value` header lines, a blank line, then the age file
/// (zlib-compressed when the header says `compressed: zlib`). Format: vectors/age/README.md.
public struct AgeVector: Sendable {
    public let name: String
    /// Header fields in order; `identity` may repeat.
    public let headers: [(key: String, value: String)]
    /// The age file, decompressed.
    public let file: Data

    public func values(_ key: String) -> [String] { headers.filter { $0.key == key }.map(\.value) }
    public func value(_ key: String) -> String? { values(key).first }

    public init(name: String, contents: Data) throws {
        self.name = name
        guard let separator = contents.firstRange(of: Data("\n\n".utf8)) else {
            throw VectorError("age vector \(name) has no blank line after its header")
        }
        var headers: [(key: String, value: String)] = []
        for line in String(decoding: contents[..<separator.lowerBound], as: UTF8.self).split(separator: "\n") {
            guard let colon = line.range(of: ": ") else {
                throw VectorError("age vector \(name): header line without ': ': \(line)")
            }
            headers.append((String(line[..<colon.lowerBound]), String(line[colon.upperBound...])))
        }
        self.headers = headers
        let body = Data(contents[separator.upperBound...])
        file = headers.contains { $0 == ("compressed", "zlib") } ? try Inflater.inflate(body) : body
    }
}

extension Vectors {
    /// Every CCTV age vector in `age/`, by name.
    public static func ageVectors() throws -> [AgeVector] {
        try files(in: "age").filter { $0 == $0.lowercased() && !$0.contains(".") }.map { name in
            try AgeVector(name: name, contents: data("age/\(name)"))
        }
    }
}
