import Foundation
import PixieWire
import SiblingsCrypto

/// The seed's categories of data (000_e422bd9a7c930342.txt, "What do I know?": conversations and messages,
/// contacts, memory events, notebook notes, saga chapters, plans keyed by planID, provider API keys), one table
/// each in the ``DeviceStore``.
///
/// Every table has the same frame: the row id (`plan_id` for plans), its version (`hlc` and `author`, a
/// ``RowVersion``) and a `deleted` tombstone flag, then the category's own fields (``columns``), then what the
/// reconcile loop keeps per row (its `item` and arrival `seq`; docs/pixie-sync.md). The loop ships rows, not
/// operations, and each category folds a received row by its own rule (``ranks(_:above:)``).
public enum StoreCategory: String, CaseIterable, Sendable, Codable {
    case conversations
    case messages
    case contacts
    case memoryEvents = "memory_events"
    case notebookNotes = "notebook_notes"
    case sagaChapters = "saga_chapters"
    case plans
    case providerAPIKeys = "provider_api_keys"

    /// The table's name in SQL.
    var table: String { rawValue }

    /// The row id's column: `plan_id` for plans (the seed imports plans by planID), `id` for everything else.
    public var idColumn: String { self == .plans ? "plan_id" : "id" }

    /// True for the category whose rows are secrets: provider API keys, which ride only the same-account,
    /// end-to-end encrypted path (snapshotPayload(includeSecrets: true)) and never a file.
    public var isSecret: Bool { self == .providerAPIKeys }

    /// The category's own fields, in schema order.
    public var columns: [StoreColumn] {
        switch self {
        case .conversations:
            [.init("title", .text), .init("created_at", .integer)]
        case .messages:
            [
                .init("conversation_id", .text), .init("sender", .text), .init("body", .text),
                .init("sent_at", .integer),
            ]
        case .contacts:
            [
                .init("display_name", .text), .init("pubkey", .blob),
                .init("user_id_hash", .blob, byteCount: 32), .init("account_signing_pubkey", .blob),
                .init("channel_key", .blob, byteCount: 32),
            ]
        case .memoryEvents:
            [.init("kind", .text), .init("body", .text), .init("occurred_at", .integer)]
        case .notebookNotes:
            [.init("title", .text), .init("body", .text)]
        case .sagaChapters:
            [.init("saga_id", .text), .init("number", .integer), .init("title", .text), .init("body", .text)]
        case .plans:
            [.init("title", .text), .init("body", .text)]
        case .providerAPIKeys:
            [.init("provider", .text), .init("api_key", .text)]
        }
    }

    /// True where a deletion is final (docs/pixie-sync.md, "The fold"): messages ("delete for everyone"), their
    /// conversations, memory events the person told the agent to forget, and provider keys the person removed. A
    /// tombstone there outranks every live version, and a deleted row cannot be written again. Elsewhere the
    /// newest version wins, deletion or not (the seed's causal newest-wins).
    public var deletionIsFinal: Bool {
        switch self {
        case .messages, .conversations, .memoryEvents, .providerAPIKeys: true
        case .contacts, .notebookNotes, .sagaChapters, .plans: false
        }
    }

    /// The fields an edit may not change: a message's conversation, sender and time are fixed when it is sent.
    public var fixedFields: [String] { self == .messages ? ["conversation_id", "sender", "sent_at"] : [] }

    /// The fold (docs/pixie-sync.md, "The fold"): true when version `a` of a row outranks version `b` of the same
    /// row, by the category's total order on (version, deleted). Applying rows by it in any order, with
    /// duplicates, leaves every device with the same fold.
    public func ranks(
        _ a: (version: RowVersion, isDeleted: Bool), above b: (version: RowVersion, isDeleted: Bool)
    )
        -> Bool
    {
        if deletionIsFinal, a.isDeleted != b.isDeleted { return a.isDeleted }
        if a.version != b.version { return a.version > b.version }
        return a.isDeleted && !b.isDeleted
    }

    /// The SQL that is true when the row `new` outranks the row `old` (two aliases of this category's table).
    func outranksSQL(_ new: String, _ old: String) -> String {
        deletionIsFinal
            ? "(\(new).deleted, \(new).hlc, \(new).author) > (\(old).deleted, \(old).hlc, \(old).author)"
            : "(\(new).hlc, \(new).author, \(new).deleted) > (\(old).hlc, \(old).author, \(old).deleted)"
    }

    /// The category named `name`: its raw value (`notebook_notes`), with `-` for `_` accepted.
    public init?(named name: String) {
        self.init(rawValue: name.replacingOccurrences(of: "-", with: "_"))
    }
}

/// One field of a ``StoreCategory``: its column name, its type, and for keys and hashes their exact length.
/// Every field is required in a live row; a tombstone keeps none.
public struct StoreColumn: Sendable, Hashable {
    public enum Kind: String, Sendable, Hashable {
        case text, integer, blob
    }

    public let name: String
    public let kind: Kind
    /// The exact length a blob must have (32 for a userIDHash or channel key), or nil for any.
    public let byteCount: Int?

    init(_ name: String, _ kind: Kind, byteCount: Int? = nil) {
        self.name = name
        self.kind = kind
        self.byteCount = byteCount
    }

    var sqlType: String {
        switch kind {
        case .text: "TEXT"
        case .integer: "INTEGER"
        case .blob: "BLOB"
        }
    }
}

/// A field's value in a ``StoreRow``.
public enum StoreValue: Sendable, Hashable, CustomStringConvertible {
    case text(String)
    case integer(Int64)
    case blob(Data)

    var kind: StoreColumn.Kind {
        switch self {
        case .text: .text
        case .integer: .integer
        case .blob: .blob
        }
    }

    public var text: String? {
        if case .text(let value) = self { value } else { nil }
    }
    public var integer: Int64? {
        if case .integer(let value) = self { value } else { nil }
    }
    public var blob: Data? {
        if case .blob(let value) = self { value } else { nil }
    }

    public var description: String {
        switch self {
        case .text(let value): value
        case .integer(let value): String(value)
        case .blob(let value): value.hexString
        }
    }
}

/// One row of the ``DeviceStore``: its id within its category, its version (the writing device's clock reading and
/// author tag: docs/pixie-sync.md, "Versions"), whether it is a tombstone, and its fields (empty in a tombstone: a
/// deletion keeps no content).
public struct StoreRow: Sendable, Hashable {
    public let category: StoreCategory
    public let id: String
    public let version: RowVersion
    public let isDeleted: Bool
    public let fields: [String: StoreValue]

    public init(
        category: StoreCategory, id: String, version: RowVersion, isDeleted: Bool, fields: [String: StoreValue]
    ) {
        self.category = category
        self.id = id
        self.version = version
        self.isDeleted = isDeleted
        self.fields = fields
    }

    public subscript(field: String) -> StoreValue? { fields[field] }

    /// True when this version outranks `other`, a version of the same row, by the category's fold.
    public func outranks(_ other: StoreRow) -> Bool {
        category.ranks((version, isDeleted), above: (other.version, other.isDeleted))
    }
}
