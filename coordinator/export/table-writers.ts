// The two file formats of a trace export, each written as rows arrive, to an open file descriptor
// (the caller's temp file): CSV (RFC 4180, a header line, `\n` line ends, fields quoted only when
// they hold `"`, `,`, CR or LF, or are empty strings; a missing value is an empty field; floats
// always carry a `.` or an exponent so a reader infers float) and Parquet (hyparquet-writer: one
// row group per ROW_GROUP_ROWS rows, so memory stays flat whatever the length of the trace).
// NOT what the rows hold (trace-table.ts) nor where the file goes (trace-export.ts).
import { ByteWriter, ParquetWriter, schemaFromColumnData, type ColumnSource, type Writer } from 'hyparquet-writer';
import { writeAll } from '../durable-file.js';
import type { Cell, Column, ColumnType } from './trace-table.js';

/** Rows per Parquet row group (4096 steps of 16 agents). */
export const ROW_GROUP_ROWS = 65_536;
/** Bytes gathered before a write to the file. */
const CHUNK_BYTES = 1 << 20;
/** The format id recorded in a Parquet export's key-value metadata (`detsim.format`). */
export const TABLE_FORMAT = 'detsim-trace-table-v1';

export const EXPORT_FORMATS = ['csv', 'parquet'] as const;
export type ExportFormat = (typeof EXPORT_FORMATS)[number];

/** Rows in, a file out: `add` each row, then `finish` once (flushes everything written so far). */
export interface TableWriter {
  add(row: readonly Cell[]): void;
  finish(): void;
}

export function tableWriter(format: ExportFormat, fd: number, columns: readonly Column[]): TableWriter {
  return format === 'csv' ? new CsvWriter(fd, columns) : new ParquetTableWriter(fd, columns);
}

// ---------------------------------------------------------------------------------------------
// CSV

const NEEDS_QUOTES = /[",\r\n]/;

function csvText(s: string): string {
  if (s.length === 0) return '""';
  return NEEDS_QUOTES.test(s) ? `"${s.replaceAll('"', '""')}"` : s;
}

/** A float as ECMAScript prints it, with `.0` added to an integral one (`1` → `1.0`; `1e+21` stays). */
export function floatText(n: number): string {
  const s = String(n);
  return /^-?[0-9]+$/.test(s) ? `${s}.0` : s;
}

function csvCell(v: Cell, type: ColumnType): string {
  if (v === null) return '';
  if (typeof v === 'string') return csvText(v);
  if (typeof v === 'boolean') return v ? 'true' : 'false';
  return type === 'float64' ? floatText(v) : String(v);
}

class CsvWriter implements TableWriter {
  private parts: string[] = [];
  private size = 0;
  private readonly types: ColumnType[];

  constructor(
    private readonly fd: number,
    columns: readonly Column[],
  ) {
    this.types = columns.map((c) => c.type);
    this.push(columns.map((c) => csvText(c.name)).join(','));
  }

  add(row: readonly Cell[]): void {
    let line = csvCell(row[0]!, this.types[0]!);
    for (let i = 1; i < row.length; i++) line += `,${csvCell(row[i]!, this.types[i]!)}`;
    this.push(line);
  }

  finish(): void {
    this.flush();
  }

  private push(line: string): void {
    this.parts.push(line, '\n');
    this.size += line.length + 1;
    if (this.size >= CHUNK_BYTES) this.flush();
  }

  private flush(): void {
    if (this.parts.length === 0) return;
    writeAll(this.fd, Buffer.from(this.parts.join(''), 'utf8'));
    this.parts = [];
    this.size = 0;
  }
}

// ---------------------------------------------------------------------------------------------
// Parquet

const PARQUET_TYPES = { int64: 'INT64', float64: 'DOUBLE', bool: 'BOOLEAN', string: 'STRING' } as const;

/** hyparquet-writer's ByteWriter, emptied into the file after each row group (and when it passes a chunk). */
function fdByteWriter(fd: number): Writer {
  const w: ByteWriter & Writer = new ByteWriter();
  const drain = () => {
    if (w.index === 0) return;
    writeAll(fd, new Uint8Array(w.buffer, 0, w.index));
    w.index = 0;
  };
  const ensure = w.ensure.bind(w);
  w.ensure = (size: number) => {
    if (w.index > CHUNK_BYTES) drain();
    ensure(size);
  };
  w.flush = drain;
  w.finish = drain;
  return w;
}

class ParquetTableWriter implements TableWriter {
  private readonly writer: ParquetWriter;
  private data: Cell[][];
  private rows = 0;

  constructor(
    fd: number,
    private readonly columns: readonly Column[],
  ) {
    const sources: ColumnSource[] = columns.map((c) => ({
      name: c.name,
      data: [],
      type: PARQUET_TYPES[c.type],
      nullable: c.nullable,
    }));
    this.writer = new ParquetWriter({
      writer: fdByteWriter(fd),
      schema: schemaFromColumnData({ columnData: sources }),
      kvMetadata: [{ key: 'detsim.format', value: TABLE_FORMAT }],
      createdBy: 'detsim trace export (hyparquet-writer)',
    });
    this.data = columns.map(() => []);
  }

  add(row: readonly Cell[]): void {
    for (let i = 0; i < row.length; i++) this.data[i]!.push(row[i]!);
    if (++this.rows >= ROW_GROUP_ROWS) this.flushGroup();
  }

  finish(): void {
    this.flushGroup();
    void this.writer.finish();
  }

  private flushGroup(): void {
    if (this.rows === 0) return;
    const columnData = this.columns.map((c, i) => {
      const data = this.data[i]!;
      return {
        name: c.name,
        data: c.type === 'int64' ? data.map((v) => (v === null ? null : BigInt(v as number))) : data,
      };
    });
    // A synchronous writer (its flush returns nothing), so write() has finished when it returns.
    void this.writer.write({ columnData, rowGroupSize: this.rows });
    this.data = this.columns.map(() => []);
    this.rows = 0;
  }
}
