import Foundation
import PixieWire

/// The snapshot's bytes (docs/pixie-protocol.md, "The snapshot"): what BackupService.exportRawPayload writes and
/// importRawPayload reads, the store's fold as rows, before BlobCrypto or an archive seals it.
///
///     header: "pixie/snapshot/v1" (17 bytes of ASCII) ‖ schema (1) ‖ flags (1)
///       schema: the DeviceStore schema version the rows follow: 2 (1 is read too: archives made before versions)
///       flags: bit 0 set when provider API keys are included (the sync path only); the other bits are 0
///     records, each: code (1) ‖ u32 length ‖ body
///       code 1 to 8: a row of the category with that code (``StoreCategory/snapshotCode``); body:
///         u16 length ‖ id (UTF-8) ‖ hlc (8) ‖ author (8) ‖ deleted (1: 0 or 1) ‖ the fields, unless deleted
///         (schema 1: version (8) where hlc ‖ author are, read as that hlc and the migrated author):
///         one per column of the category, in schema order, each kind (1) ‖ value:
///           1 text: u32 length ‖ UTF-8;  2 integer: 8 bytes, two's complement;  3 blob: u32 length ‖ bytes
///       code 0: the end; body: the number of rows before it (8). Nothing may follow it.
///
/// Integers are big-endian. A snapshot without its end record was cut, and is refused.
package enum StoreSnapshot {
    static let magic = Data("pixie/snapshot/v1".utf8)
    static let schema: UInt8 = 2
    /// The schemas a snapshot may follow and still be read.
    static let readableSchemas: ClosedRange<UInt8> = 1...2
    static let secretsFlag: UInt8 = 1
    /// No record is longer: a row of 64 MiB is far past any note or message, and bounds what one record can make
    /// the reader hold.
    static let maximumRecordByteCount = 64 << 20

    package static func header(includeSecrets: Bool) -> Data {
        magic + Data([schema, includeSecrets ? secretsFlag : 0])
    }

    /// Appends `row`'s record to `out`, each field copied once, straight into place (the record's length is filled
    /// in last).
    package static func append(_ row: StoreRow, to out: inout Data) {
        out.append(row.category.snapshotCode)
        let lengthAt = out.endIndex
        appendUInt32(0, to: &out)
        let id = Data(row.id.utf8)
        appendUInt16(UInt16(id.count), to: &out)
        out += id
        appendUInt64(row.version.hlc, to: &out)
        appendUInt64(row.version.author.rawValue, to: &out)
        out.append(row.isDeleted ? 1 : 0)
        if !row.isDeleted {
            for column in row.category.columns {
                switch row.fields[column.name]! {
                case .text(var text):
                    out.append(1)
                    appendUInt32(UInt32(text.utf8.count), to: &out)
                    text.withUTF8 { out.append($0) }
                case .integer(let value):
                    out.append(2)
                    appendUInt64(UInt64(bitPattern: value), to: &out)
                case .blob(let bytes):
                    out.append(3)
                    appendUInt32(UInt32(bytes.count), to: &out)
                    out += bytes
                }
            }
        }
        let length = UInt32(out.endIndex - lengthAt - 4)
        for (offset, shift) in [24, 16, 8, 0].enumerated() {
            out[lengthAt + offset] = UInt8(length >> UInt32(shift) & 0xff)
        }
    }

    package static func end(rowCount: UInt64) -> Data {
        var out = Data([0])
        appendUInt32(8, to: &out)
        appendUInt64(rowCount, to: &out)
        return out
    }

    static func appendUInt16(_ value: UInt16, to out: inout Data) {
        out.append(UInt8(value >> 8))
        out.append(UInt8(value & 0xff))
    }

    static func appendUInt32(_ value: UInt32, to out: inout Data) {
        for shift in stride(from: 24, through: 0, by: -8) { out.append(UInt8(value >> UInt32(shift) & 0xff)) }
    }

    static func appendUInt64(_ value: UInt64, to out: inout Data) {
        for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(value >> UInt64(shift) & 0xff)) }
    }

    /// Reads a snapshot that arrives in pieces, handing out each row as soon as its record is whole.
    package struct Reader {
        private var buffer = Data()
        package private(set) var includesSecrets = false
        private var sawHeader = false
        /// The schema the header named.
        private var rowSchema = schema
        package private(set) var isFinished = false
        package private(set) var rowCount: UInt64 = 0

        package init() {}

        /// Takes the next piece and calls `row` for every record it completes.
        package mutating func feed(_ piece: Data, row: (StoreRow) throws -> Void) throws {
            guard !piece.isEmpty else { return }
            guard !isFinished else { throw malformed("it goes on after its end record") }
            buffer += piece
            var start = buffer.startIndex
            defer { buffer = start == buffer.startIndex ? buffer : Data(buffer[start...]) }
            if !sawHeader {
                let headerCount = magic.count + 2
                guard buffer.count >= headerCount else {
                    if !magic.starts(with: buffer.prefix(magic.count)) {
                        throw malformed("it does not start with its header")
                    }
                    return
                }
                guard buffer.prefix(magic.count) == magic else { throw malformed("it does not start with its header") }
                let schemaByte = buffer[start + magic.count]
                let flags = buffer[start + magic.count + 1]
                guard readableSchemas.contains(schemaByte) else {
                    throw BackupServiceError.malformed(
                        "the snapshot follows store schema \(schemaByte), and this pixie reads schema \(schema): "
                            + "update pixie on this device")
                }
                guard flags & ~secretsFlag == 0 else { throw malformed("it sets flags this version does not know") }
                includesSecrets = flags & secretsFlag != 0
                rowSchema = schemaByte
                sawHeader = true
                start += headerCount
            }
            while buffer.endIndex - start >= 5 {
                let code = buffer[start]
                let length = Int(Self.uint32(buffer, at: start + 1))
                guard length <= maximumRecordByteCount else {
                    throw malformed("a record is \(length) bytes, more than the \(maximumRecordByteCount) allowed")
                }
                guard buffer.endIndex - start - 5 >= length else { break }
                let body = buffer[(start + 5)..<(start + 5 + length)]
                start += 5 + length
                if code == 0 {
                    guard length == 8, Self.uint64(body, at: body.startIndex) == rowCount else {
                        throw malformed("its end record does not count the \(rowCount) rows before it")
                    }
                    isFinished = true
                    guard start == buffer.endIndex else { throw malformed("it goes on after its end record") }
                    return
                }
                guard let category = StoreCategory(snapshotCode: code) else {
                    throw malformed("a record has code \(code), which this version does not know; update pixie")
                }
                let decoded = try Self.decodeRow(body, category, schema: rowSchema)
                if category.isSecret && !includesSecrets {
                    throw malformed("it holds a provider API key but its header says it carries no secrets")
                }
                rowCount += 1
                try row(decoded)
            }
        }

        /// Throws unless the end record was read.
        package func finish() throws {
            guard isFinished else {
                throw BackupServiceError.tampered(
                    "the snapshot ends after \(rowCount) rows without its end record: it was cut short")
            }
        }

        private func malformed(_ what: String) -> BackupServiceError {
            .malformed("the snapshot is damaged: \(what)")
        }

        static func uint32(_ data: Data, at index: Data.Index) -> UInt32 {
            data[index..<(index + 4)].reduce(0) { $0 << 8 | UInt32($1) }
        }

        static func uint64(_ data: Data, at index: Data.Index) -> UInt64 {
            data[index..<(index + 8)].reduce(0) { $0 << 8 | UInt64($1) }
        }

        package static func decodeRow(_ body: Data, _ category: StoreCategory, schema: UInt8) throws -> StoreRow {
            var offset = body.startIndex
            func take(_ count: Int) throws -> Data {
                guard count >= 0, body.endIndex - offset >= count else {
                    throw BackupServiceError.malformed(
                        "the snapshot is damaged: a \(category.rawValue) record ends before its fields do")
                }
                defer { offset += count }
                return body[offset..<(offset + count)]
            }
            let idLength = try take(2).reduce(0) { Int($0) << 8 | Int($1) }
            guard let id = String(data: try take(idLength), encoding: .utf8) else {
                throw BackupServiceError.malformed("the snapshot is damaged: a row id is not UTF-8")
            }
            let hlc = try take(8).reduce(0) { $0 << 8 | UInt64($1) }
            let author =
                schema == 1 ? AuthorTag.migrated : AuthorTag(rawValue: try take(8).reduce(0) { $0 << 8 | UInt64($1) })
            let version = RowVersion(hlc: hlc, author: author)
            let deleted = try take(1).first!
            guard deleted <= 1, hlc >= 1, hlc <= UInt64(Int64.max) else {
                throw BackupServiceError.malformed("the snapshot is damaged: the row \(id) has a bad version or flag")
            }
            var fields: [String: StoreValue] = [:]
            if deleted == 0 {
                for column in category.columns {
                    let kind = try take(1).first!
                    switch kind {
                    case 1:
                        let count = Int(try take(4).reduce(0) { $0 << 8 | UInt32($1) })
                        guard let text = String(data: try take(count), encoding: .utf8) else {
                            throw BackupServiceError.malformed(
                                "the snapshot is damaged: \(column.name) of row \(id) is not UTF-8")
                        }
                        fields[column.name] = .text(text)
                    case 2:
                        fields[column.name] = .integer(
                            Int64(bitPattern: try take(8).reduce(0) { $0 << 8 | UInt64($1) }))
                    case 3:
                        let count = Int(try take(4).reduce(0) { $0 << 8 | UInt32($1) })
                        fields[column.name] = .blob(Data(try take(count)))
                    default:
                        throw BackupServiceError.malformed(
                            "the snapshot is damaged: \(column.name) of row \(id) has value kind \(kind)")
                    }
                }
            }
            guard offset == body.endIndex else {
                throw BackupServiceError.malformed("the snapshot is damaged: the row \(id) has bytes after its fields")
            }
            return StoreRow(category: category, id: id, version: version, isDeleted: deleted == 1, fields: fields)
        }
    }
}

extension StoreCategory {
    /// The category's code in a snapshot record and in the reconcile loop's messages (docs/pixie-protocol.md, "The
    /// snapshot"; docs/pixie-sync.md, "Messages"). Fixed: a new category
    /// takes the next free code.
    public var snapshotCode: UInt8 {
        switch self {
        case .conversations: 1
        case .messages: 2
        case .contacts: 3
        case .memoryEvents: 4
        case .notebookNotes: 5
        case .sagaChapters: 6
        case .plans: 7
        case .providerAPIKeys: 8
        }
    }

    public init?(snapshotCode: UInt8) {
        guard let category = StoreCategory.allCases.first(where: { $0.snapshotCode == snapshotCode }) else {
            return nil
        }
        self = category
    }
}
